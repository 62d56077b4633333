//! The bounded pool that argon2 runs on, shared by sign-ins and user
//! creation.

/// At most this many argon2 verifications run at once (19 MiB each); the
/// rest wait their turn without holding an async worker.
const SLOTS_AT_ONCE: usize = 2;

/// Runs one argon2 computation on the blocking pool, at most [`SLOTS_AT_ONCE`]
/// at a time, so a burst of sign-ins or user creations never stalls the
/// async workers that take webhooks. `None` if the pool is gone.
pub(crate) async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    let slots = SLOTS.get_or_init(|| tokio::sync::Semaphore::new(SLOTS_AT_ONCE));
    let _slot = slots.acquire().await.ok()?;
    tokio::task::spawn_blocking(work).await.ok()
}
