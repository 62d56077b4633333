//! What a new tenant or endpoint starts with, written in the transaction
//! that creates its row: retry policy version 1 (disabled) and retention
//! version 1 (the defaults, never under the scheme's redelivery horizon nor
//! its manual resend window).
//! The operations that change these later (`retry_policy`,
//! `retention`) build on this, not the other way round.

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set};

use crate::{
    auth::Actor,
    clock::DAY_SECS,
    entity::{redelivery_horizon as horizon, retention_version, retry_policy_version as policy_version},
    error::{DomainError, DomainResult},
};
use views::{retry_policy::RetryPolicy, scheme::Scheme};

pub const DEFAULT_DEDUP_SECS: i64 = 30 * DAY_SECS;
pub const DEFAULT_BODY_SECS: i64 = 7 * DAY_SECS;

/// Records version 1 for a tenant being created (inside its transaction).
pub(crate) async fn retry_policy_v1<C: ConnectionTrait>(
    conn: &C,
    actor: &Actor,
    tenant_id: &str,
    now: i64,
) -> DomainResult<()> {
    policy_version::Entity::insert(policy_version::ActiveModel {
        tenant_id: Set(tenant_id.to_owned()),
        version: Set(1),
        policy: Set(RetryPolicy::Disabled),
        actor: Set(actor.name().to_owned()),
        reason: Set(
            "initial policy: retries stay off until the drills pass and the tenant's cohort is enabled".to_owned()
        ),
        created_at: Set(now),
    })
    .exec_without_returning(conn)
    .await?;
    Ok(())
}

/// Records version 1 (the defaults) for an endpoint being created, inside
/// its transaction.
pub(crate) async fn retention_v1<C: ConnectionTrait>(
    conn: &C,
    actor: &Actor,
    endpoint_id: &str,
    scheme: Scheme,
    now: i64,
) -> DomainResult<()> {
    let h = horizon_of(conn, scheme.as_str()).await?;
    retention_version::Entity::insert(retention_version::ActiveModel {
        endpoint_id: Set(endpoint_id.to_owned()),
        version: Set(1),
        dedup_secs: Set(DEFAULT_DEDUP_SECS.max(h.horizon_secs).max(h.manual_resend_secs)),
        body_secs: Set(DEFAULT_BODY_SECS),
        horizon_secs: Set(h.horizon_secs),
        actor: Set(actor.name().to_owned()),
        reason: Set("default retention".to_owned()),
        created_at: Set(now),
    })
    .exec_without_returning(conn)
    .await?;
    Ok(())
}

/// The newest redelivery horizon of a scheme.
pub(crate) async fn horizon_of<C: ConnectionTrait>(conn: &C, scheme: &str) -> DomainResult<horizon::Model> {
    horizon::Entity::find()
        .filter(horizon::Column::Scheme.eq(scheme))
        .order_by_desc(horizon::Column::Version)
        .one(conn)
        .await?
        .ok_or_else(|| {
            DomainError::conflict("horizon_missing", format!("no redelivery horizon is recorded for {scheme}"))
        })
}
