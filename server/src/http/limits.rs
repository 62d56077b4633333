//! Request-level limits (the connection-level ones are in `listen`).

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Json,
    extract::Request,
    middleware::Next,
    response::{IntoResponse, Response},
};
use http::{HeaderValue, StatusCode, header};
use tokio::sync::Semaphore;

use crate::metrics::Metrics;

/// Answers 503 with `Retry-After` when a request is not answered within
/// `limit`. A webhook cut off here may still have committed; the provider's
/// retry then answers `duplicate`, so nothing is applied twice.
pub async fn request_timeout(limit: Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(res) => res,
        Err(_) => {
            tracing::warn!(limit_secs = limit.as_secs(), "request timed out");
            unavailable("timeout", "the request took too long; retry later")
        }
    }
}

/// At most this many `/hooks` deliveries are processed at once; the rest
/// are told to come back (503 `Retry-After: 1`) rather than queued without
/// bound. Providers retry 5xx answers by design.
#[derive(Clone)]
pub struct InFlight(Arc<Semaphore>);

impl InFlight {
    pub fn new(limit: usize) -> Self {
        InFlight(Arc::new(Semaphore::new(limit.max(1))))
    }
}

pub async fn hooks_in_flight(limit: InFlight, metrics: Arc<Metrics>, req: Request, next: Next) -> Response {
    let Ok(_slot) = limit.0.try_acquire_owned() else {
        tracing::warn!("webhook refused: too many in flight");
        metrics.observe_shed("in_flight");
        return overloaded("too many webhooks in flight; retry shortly");
    };
    let _counted = Counted::new(metrics.hooks_in_flight());
    next.run(req).await
}

/// One delivery in `signet_hooks_in_flight`, until dropped (with the
/// request's future: a client gone mid-request is uncounted too).
struct Counted(prometheus::IntGauge);

impl Counted {
    fn new(gauge: &prometheus::IntGauge) -> Counted {
        gauge.inc();
        Counted(gauge.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// 503 `overloaded` with `Retry-After: 1`: a limit on work held at once was
/// reached; nothing of the request was processed.
pub fn overloaded(message: &str) -> Response {
    let mut res = unavailable("overloaded", message);
    res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    res
}

/// Webhook body bytes held in memory at once, across every delivery
/// (`SIGNET_MAX_INFLIGHT_BODY_BYTES`). A body is read whole before its
/// signature can be checked, so without a shared bound anyone could make
/// the server hold the in-flight limit times the largest endpoint limit.
///
/// The last eighth is kept for bodies of at most [`SMALL_BODY`] bytes: a
/// flood of large bodies is refused while ordinary webhooks are still
/// taken.
#[derive(Debug)]
pub struct BodyBudget {
    capacity: usize,
    used: AtomicUsize,
}

/// Bodies up to this size may use the whole budget.
pub const SMALL_BODY: usize = 64 * 1024;

impl BodyBudget {
    pub fn new(capacity: usize) -> Arc<BodyBudget> {
        Arc::new(BodyBudget { capacity, used: AtomicUsize::new(0) })
    }

    /// What a body of `total` bytes may bring the budget's use up to.
    fn ceiling(&self, total: usize) -> usize {
        if total <= SMALL_BODY { self.capacity } else { self.capacity - self.capacity / 8 }
    }

    /// Bytes held right now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

/// The bytes one delivery holds from a [`BodyBudget`]; given back when it
/// is dropped, whichever way the delivery ends (answered, refused, timed
/// out, its connection gone).
#[derive(Debug)]
pub struct BodyReservation {
    budget: Arc<BodyBudget>,
    bytes: usize,
}

impl BodyReservation {
    pub fn new(budget: Arc<BodyBudget>) -> BodyReservation {
        BodyReservation { budget, bytes: 0 }
    }

    /// Holds `total` bytes in all; `false` (holding what it held) when the
    /// budget has not that much left.
    pub fn grow_to(&mut self, total: usize) -> bool {
        let Some(more) = total.checked_sub(self.bytes).filter(|m| *m > 0) else { return true };
        let ceiling = self.budget.ceiling(total);
        let taken = self
            .budget
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| used.checked_add(more).filter(|a| *a <= ceiling));
        if taken.is_ok() {
            self.bytes = total;
        }
        taken.is_ok()
    }
}

impl Drop for BodyReservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

fn unavailable(code: &str, message: &str) -> Response {
    let mut res =
        (StatusCode::SERVICE_UNAVAILABLE, Json(serde_json::json!({"error": code, "message": message}))).into_response();
    res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_share_one_budget_and_give_it_back() {
        const MIB: usize = 1024 * 1024;
        let budget = BodyBudget::new(80 * MIB);
        let mut a = BodyReservation::new(budget.clone());
        let mut b = BodyReservation::new(budget.clone());
        assert!(a.grow_to(40 * MIB));
        assert!(!b.grow_to(31 * MIB), "large bodies leave the last eighth: refused");
        assert_eq!(budget.used(), 40 * MIB, "a refusal takes nothing");
        assert!(b.grow_to(30 * MIB));
        assert!(a.grow_to(40 * MIB) && a.grow_to(MIB), "holding less than it has asks for nothing");
        assert!(!a.grow_to(40 * MIB + 1));
        // The last eighth takes small bodies, and nothing past the budget.
        let mut small: Vec<BodyReservation> = (0..160).map(|_| BodyReservation::new(budget.clone())).collect();
        assert!(small.iter_mut().all(|r| r.grow_to(SMALL_BODY)));
        assert_eq!(budget.used(), 80 * MIB);
        assert!(!BodyReservation::new(budget.clone()).grow_to(1));
        drop(small);
        drop(a);
        assert_eq!(budget.used(), 30 * MIB);
        drop(b);
        assert_eq!(budget.used(), 0);
    }
}
