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
    ColumnTrait, Condition, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter,
    sea_query::{Expr, ExprTrait},
};

use crate::entity::replay_record;

/// The records kept by their expiry (`expires_at`): every record on SQLite;
/// on PostgreSQL only those with `signed_at = 0` (`replay_records_unsigned`),
/// since a day of signed ones goes whole once nothing signed in it passes
/// the gate (`retention::partitions::REPLAY_DAY_KEPT_MS`).
pub fn kept_by_expiry(backend: DbBackend) -> Condition {
    match backend {
        DbBackend::Postgres => Condition::all().add(replay_record::Column::SignedAt.eq(0)),
        _ => Condition::all(),
    }
}

/// When the purge removes `r` (at its first run after this): its expiry
/// where it is [`kept_by_expiry`]; on PostgreSQL a signed record goes with
/// its day's partition instead, `REPLAY_DAY_KEPT_MS` after that day ends.
pub fn kept_until(backend: DbBackend, r: &replay_record::Model) -> i64 {
    use crate::retention::partitions::{DAY_MS, REPLAY_DAY_KEPT_MS, day_of};
    if backend == DbBackend::Postgres && r.signed_at != 0 {
        (day_of(r.signed_at) + 1) * DAY_MS + REPLAY_DAY_KEPT_MS
    } else {
        r.expires_at
    }
}

/// Adds `by_ms` to the expiry of every replay record of the endpoint (a
/// longer keep time; nothing for `by_ms <= 0`) that is [`kept_by_expiry`].
/// The tenant leads the key.
pub async fn extend<C: ConnectionTrait>(
    conn: &C,
    tenant_id: &str,
    endpoint_id: &str,
    by_ms: i64,
) -> Result<u64, DbErr> {
    if by_ms <= 0 {
        return Ok(0);
    }
    let res = replay_record::Entity::update_many()
        .col_expr(replay_record::Column::ExpiresAt, Expr::col(replay_record::Column::ExpiresAt).add(by_ms))
        .filter(replay_record::Column::TenantId.eq(tenant_id))
        .filter(replay_record::Column::EndpointId.eq(endpoint_id))
        .filter(kept_by_expiry(conn.get_database_backend()))
        .exec(conn)
        .await?;
    Ok(res.rows_affected)
}
