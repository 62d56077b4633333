//! Taking a KEK version out of the ring for good.

use sea_orm::{DatabaseConnection, EntityTrait, QueryOrder, Set};
use serde_json::json;
use views::kek::RetiredView;

use super::{
    admin::{authorize, kek_change, open_err},
    sources::counts,
};
use crate::{
    audit,
    auth::Principal,
    clock,
    crypto::CryptoError,
    db,
    entity::{kek_retirement, kek_version},
    error::{DomainError, DomainResult},
    vault::Vault,
};

/// The newest version must be at least this old before an older one can be
/// retired: every instance has reloaded the ring by then.
pub const RETIRE_AFTER_NEWEST_MS: i64 = 60_000;

/// Takes a KEK version out of the ring for good. Refused while any row of
/// any source still uses it, for the newest version, and until the newest
/// has been in the ring long enough for every instance to have loaded it.
pub async fn retire(
    db: &DatabaseConnection,
    vault: &Vault,
    principal: &Principal,
    version: u32,
) -> DomainResult<RetiredView> {
    let auth = authorize(principal)?;
    let txn = db::begin_write(db).await?;
    let all = kek_version::Entity::find().order_by_asc(kek_version::Column::Version).all(&txn).await?;
    let Some(row) = all.iter().find(|v| v.version as u32 == version).cloned() else {
        if kek_retirement::Entity::find_by_id(version as i32).one(&txn).await?.is_some() {
            return Err(DomainError::conflict("kek_retired", format!("KEK version {version} is already retired")));
        }
        return Err(DomainError::NotFound);
    };
    let newest = all.last().ok_or(CryptoError::EmptyKeyring)?;
    if newest.version == row.version {
        return Err(DomainError::conflict(
            "kek_newest",
            format!("KEK version {version} is the newest: rotate first (signet kek rotate)"),
        ));
    }
    if clock::now_ms() - newest.created_at < RETIRE_AFTER_NEWEST_MS {
        return Err(DomainError::conflict(
            "kek_rotated_recently",
            format!(
                "KEK version {} was added less than a minute ago; an instance may not have loaded it yet. \
                 Try again shortly",
                newest.version
            ),
        ));
    }
    let in_use: Vec<String> = counts(&txn)
        .await?
        .into_iter()
        .filter(|((_, v), n)| *v == version && *n > 0)
        .map(|((source, _), n)| format!("{n} {source}"))
        .collect();
    if !in_use.is_empty() {
        return Err(DomainError::conflict(
            "kek_in_use",
            format!("KEK version {version} still seals {}: rewrap first (signet kek rewrap)", in_use.join(", ")),
        ));
    }
    let now = clock::now_ms();
    kek_version::Entity::delete_by_id(row.version).exec(&txn).await?;
    kek_retirement::Entity::insert(kek_retirement::ActiveModel {
        version: Set(row.version),
        created_at: Set(row.created_at),
        retired_at: Set(now),
        retired_by: Set(auth.actor().name().to_owned()),
    })
    .exec_without_returning(&txn)
    .await?;
    let target = version.to_string();
    audit::record(
        &txn,
        auth.actor(),
        kek_change("kek.retire", &target, Some(json!({"kek_version": version})), json!({"retired": true})),
    )
    .await?;
    txn.commit().await?;
    vault.refresh(db).await.map_err(open_err)?;
    Ok(RetiredView {
        version,
        created_at: clock::rfc3339(row.created_at),
        retired_at: clock::rfc3339(now),
        retired_by: auth.actor().name().to_owned(),
    })
}
