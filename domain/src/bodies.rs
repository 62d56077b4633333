//! Sealed event bodies (`event_bodies`, m20261207_000220): one per claim,
//! inserted with it, read by the quarantine release and reveal, the event
//! story and the KEK rewrap, and removed by the retention purge (a day's
//! partition at a time on PostgreSQL, [`crate::retention::partitions`]).
//! Retention never updates a claim row.

use std::collections::HashSet;

use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::entity::{event_body, inbox_claim};

/// A claim's key: (tenant, endpoint, event id).
pub type ClaimKey = (String, String, String);

/// The body row of a claim received at `received_at`, filed in that day.
pub fn row(
    tenant_id: &str,
    endpoint_id: &str,
    event_id: &str,
    received_at: i64,
    sealed: Vec<u8>,
    kek_version: u32,
) -> event_body::Model {
    event_body::Model {
        endpoint_id: endpoint_id.to_owned(),
        received_at,
        tenant_id: tenant_id.to_owned(),
        event_id: event_id.to_owned(),
        filed_at: received_at,
        kek_version: kek_version as i32,
        body_ciphertext: sealed,
    }
}

/// The claim's body by the key's prefix: its endpoint, `received_at`,
/// tenant and event id.
fn of_claim(c: &inbox_claim::Model) -> Condition {
    Condition::all()
        .add(event_body::Column::EndpointId.eq(&c.endpoint_id))
        .add(event_body::Column::ReceivedAt.eq(c.received_at))
        .add(event_body::Column::TenantId.eq(&c.tenant_id))
        .add(event_body::Column::EventId.eq(&c.event_id))
        // A body is filed no earlier than its claim was received: on
        // PostgreSQL this skips every earlier day's partition.
        .add(event_body::Column::FiledAt.gte(c.received_at))
}

/// The claim's sealed body, if retention has not removed it. A body being
/// carried forward has two filings for a moment: the latest is read.
pub async fn of<C: ConnectionTrait>(conn: &C, claim: &inbox_claim::Model) -> Result<Option<event_body::Model>, DbErr> {
    event_body::Entity::find()
        .filter(of_claim(claim))
        .order_by_desc(event_body::Column::FiledAt)
        .limit(1)
        .one(conn)
        .await
}

/// Which of these claims still have a body.
pub async fn stored<C: ConnectionTrait>(conn: &C, claims: &[&inbox_claim::Model]) -> Result<HashSet<ClaimKey>, DbErr> {
    if claims.is_empty() {
        return Ok(HashSet::new());
    }
    let any = claims.iter().fold(Condition::any(), |c, claim| c.add(of_claim(claim)));
    let rows: Vec<ClaimKey> = event_body::Entity::find()
        .select_only()
        .column(event_body::Column::TenantId)
        .column(event_body::Column::EndpointId)
        .column(event_body::Column::EventId)
        .filter(any)
        .into_tuple()
        .all(conn)
        .await?;
    Ok(rows.into_iter().collect())
}
