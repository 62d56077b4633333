//! Per-caller budgets for expensive calls (an evidence export, a drill run):
//! a burst, then a steady refill (GCRA, by `governor`). In memory, per
//! process: a budget bounds what one caller can make one instance do; it is
//! not a cluster-wide quota. Refusals are [`DomainError::RateLimited`], which
//! every edge answers as 429 with `Retry-After`.

use std::{num::NonZeroU32, time::Duration};

use governor::{
    Quota, RateLimiter,
    clock::{Clock, DefaultClock},
    state::keyed::HashMapStateStore,
};

use crate::{
    auth::{Actor, Principal},
    error::{DomainError, DomainResult},
};

/// The budgets one process keeps.
pub struct Budgets {
    /// Evidence exports (API and console): each collects and verifies
    /// everything the bundle reads, signs it and stores it.
    pub exports: CallBudget,
}

/// Exports at once, then one more every [`EXPORT_REFILL`].
pub const EXPORT_BURST: NonZeroU32 = NonZeroU32::new(10).unwrap();
pub const EXPORT_REFILL: Duration = Duration::from_secs(10);

impl Default for Budgets {
    fn default() -> Self {
        Budgets { exports: CallBudget::new("export_rate_limited", "evidence exports", EXPORT_BURST, EXPORT_REFILL) }
    }
}

/// One kind of call's budget, kept per caller (user or token).
pub struct CallBudget {
    code: &'static str,
    what: &'static str,
    limiter: RateLimiter<String, HashMapStateStore<String>, DefaultClock>,
    clock: DefaultClock,
}

impl CallBudget {
    /// `burst` calls at once, then one more every `refill`. `code` is the
    /// refusal's error code, `what` names the call in its message.
    pub fn new(code: &'static str, what: &'static str, burst: NonZeroU32, refill: Duration) -> Self {
        let quota = Quota::with_period(refill).unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN)).allow_burst(burst);
        let clock = DefaultClock::default();
        CallBudget { code, what, limiter: RateLimiter::new(quota, HashMapStateStore::default(), clock.clone()), clock }
    }

    /// Takes one call from `principal`'s budget, or refuses with how long to
    /// wait. The operator CLI and Signet itself are not budgeted: they act
    /// on the database directly.
    pub fn take(&self, principal: &Principal) -> DomainResult<()> {
        let key = match &principal.actor {
            Actor::User { id, .. } => format!("user:{id}"),
            Actor::Token { id, .. } => format!("token:{id}"),
            Actor::Cli | Actor::System => return Ok(()),
        };
        // Keys of callers whose budget has refilled carry no state worth keeping.
        if self.limiter.len() > 1024 {
            self.limiter.retain_recent();
        }
        self.limiter.check_key(&key).map_err(|until| {
            let wait = until.wait_time_from(self.clock.now());
            let retry_after_secs = i64::try_from(wait.as_secs()).unwrap_or(i64::MAX).saturating_add(1);
            DomainError::RateLimited {
                code: self.code,
                message: format!("too many {} by this caller; try again in {retry_after_secs} s", self.what),
                retry_after_secs,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use views::roles::Role;

    fn user(id: &str) -> Principal {
        Principal { actor: Actor::User { id: id.into(), username: id.into() }, role: Role::Reviewer, tenant_id: None }
    }

    #[test]
    fn a_caller_gets_its_burst_then_a_refusal_with_a_wait_and_others_are_unaffected() {
        let budget =
            CallBudget::new("export_rate_limited", "exports", NonZeroU32::new(3).unwrap(), Duration::from_secs(20));
        for _ in 0..3 {
            budget.take(&user("a")).unwrap();
        }
        match budget.take(&user("a")) {
            Err(DomainError::RateLimited { code: "export_rate_limited", retry_after_secs, .. }) => {
                assert!((1..=21).contains(&retry_after_secs), "{retry_after_secs}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        budget.take(&user("b")).unwrap();
        let cli = Principal { actor: Actor::Cli, role: Role::Admin, tenant_id: None };
        for _ in 0..10 {
            budget.take(&cli).unwrap();
        }
    }
}
