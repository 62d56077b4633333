//! Which key a failed verification is counted under (the "verification
//! logs" per credential of docs/architecture.md#idempotency-is-not-authorization):
//! the key it named or matched, else the endpoint's key that verified last;
//! only ever one of the keys the endpoint accepts, so `/metrics` and the
//! per-key rollups agree.

use std::{collections::HashMap, sync::RwLock};

use super::{cache::EndpointCtx, outcome::Refusal, verify::Rejected};

/// Each endpoint's key that verified last.
#[derive(Default)]
pub(super) struct Attribution {
    last_verified: RwLock<HashMap<String, String>>,
}

impl Attribution {
    /// Records the key that just verified for the endpoint (a write only
    /// when it changed).
    pub fn verified(&self, endpoint_id: &str, key_id: &str) {
        let known =
            self.last_verified.read().unwrap_or_else(|p| p.into_inner()).get(endpoint_id).is_some_and(|k| k == key_id);
        if !known {
            self.last_verified
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(endpoint_id.to_owned(), key_id.to_owned());
        }
    }

    /// The refusal and the key it counts under, among the keys `ep` (the set
    /// it was verified against) accepts. A request naming a key outside
    /// that set is counted under none.
    pub fn refused(&self, ep: &EndpointCtx, rejected: Rejected) -> (Refusal, Option<String>) {
        let last = || self.last_verified.read().unwrap_or_else(|p| p.into_inner()).get(&ep.endpoint_id).cloned();
        let key = match rejected.refusal {
            Refusal::UnknownKey => None,
            _ => rejected.key_id.or_else(last),
        };
        (rejected.refusal, key.filter(|k| ep.keys.iter().any(|a| a.key_id == *k)))
    }
}
