//! Replay records (gate 6) outlive their signed message's acceptance window.
//!
//! A record is written with the endpoint's keep time
//! (`receiver::cache::EndpointCtx::replay_keep_ms`): twice the tolerance for
//! schemes that sign a timestamp, the dedup retention for GitHub, whose
//! signature covers the body alone. When that keep time grows (a larger
//! tolerance, a longer retention), the records already held grow with it,
//! in the same transaction as the change, so no message becomes acceptable
//! again while the record that refuses it is still expected to exist.

use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter,
    sea_query::{Expr, ExprTrait},
};

use crate::entity::replay_record;

/// Adds `by_ms` to the expiry of every replay record of the endpoint (a
/// longer keep time; nothing for `by_ms <= 0`). The tenant leads the key.
/// On PostgreSQL only the records kept by expiry (`signed_at = 0`): a day of
/// signed ones goes whole, once nothing signed in it passes the gate.
pub async fn extend<C: ConnectionTrait>(
    conn: &C,
    tenant_id: &str,
    endpoint_id: &str,
    by_ms: i64,
) -> Result<u64, DbErr> {
    if by_ms <= 0 {
        return Ok(0);
    }
    let mut update = replay_record::Entity::update_many()
        .col_expr(replay_record::Column::ExpiresAt, Expr::col(replay_record::Column::ExpiresAt).add(by_ms))
        .filter(replay_record::Column::TenantId.eq(tenant_id))
        .filter(replay_record::Column::EndpointId.eq(endpoint_id));
    if conn.get_database_backend() == DbBackend::Postgres {
        update = update.filter(replay_record::Column::SignedAt.eq(0));
    }
    let res = update.exec(conn).await?;
    Ok(res.rows_affected)
}
