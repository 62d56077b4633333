//! Live pages (a bulk release, a drill run, a KEK rewrap) re-read their data
//! every second while something runs, once hydrated.

use std::time::Duration;

use leptos::prelude::*;

/// A counter that moves every second while `live` is true (hydrated only:
/// the interval never runs on the server). Put it in a resource's source.
pub fn every_second_while(live: RwSignal<bool>) -> RwSignal<u64> {
    let tick = RwSignal::new(0u64);
    Effect::new(move |_| {
        let poll = move || {
            if live.get_untracked() {
                tick.update(|n| *n += 1);
            }
        };
        if let Ok(handle) = set_interval_with_handle(poll, Duration::from_secs(1)) {
            on_cleanup(move || handle.clear());
        }
    });
    tick
}
