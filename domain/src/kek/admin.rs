//! What every KEK change shares: the permission it needs, the audit entry
//! it writes, and how a failed refresh of the ring reads.

use crate::{
    audit::Change,
    auth::{Authorized, Principal, Scope},
    crypto::CryptoError,
    error::{DomainError, DomainResult},
};
use views::roles::Permission;

pub(super) fn authorize(principal: &Principal) -> DomainResult<Authorized> {
    principal.authorize(Permission::ManageKeks, Scope::Global)
}

/// An audit entry about KEK version `version` (its decimal text).
pub(super) fn kek_change<'a>(
    action: &'a str,
    version: &'a str,
    before: Option<serde_json::Value>,
    after: serde_json::Value,
) -> Change<'a> {
    Change { action, target_kind: "kek", target_id: version, tenant_id: None, before, after: Some(after) }
}

pub(crate) fn open_err(e: crate::vault::VaultOpenError) -> DomainError {
    use crate::vault::VaultOpenError;
    match e {
        VaultOpenError::Db(d) => DomainError::Db(d),
        VaultOpenError::Crypto(c) => DomainError::Crypto(c),
        VaultOpenError::WrongMasterKey(_) | VaultOpenError::AuditKey(_) => {
            DomainError::Crypto(CryptoError::Unauthentic)
        }
    }
}
