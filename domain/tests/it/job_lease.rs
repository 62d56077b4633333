//! Job leases on both engines: one holder at a time, decided by the
//! database; a lease that expires goes to the next taker under a higher
//! epoch, and the old holder's renewal then matches nothing.

use std::time::Duration;

use domain::job_lease::{acquire, current, release, renew};

use crate::{db_test, support::TestDb};

db_test!(one_holder_at_a_time_and_a_stale_holder_is_fenced_off, async |t: &TestDb| {
    let db = &t.db;
    let a = acquire(db, "purge", "a", 60_000).await.unwrap().expect("a free lease is taken");
    assert_eq!(acquire(db, "purge", "b", 60_000).await.unwrap(), None, "held by a");
    assert_eq!(acquire(db, "purge", "a", 60_000).await.unwrap(), None, "not taken twice, even by its holder");
    assert!(renew(db, "purge", "a", a, 60_000).await.unwrap());
    assert!(!renew(db, "purge", "b", a, 60_000).await.unwrap(), "only the holder renews");
    // Another job is independent.
    assert!(acquire(db, "gauges", "b", 60_000).await.unwrap().is_some());

    // A short lease expires, and the next taker gets a higher epoch.
    release(db, "purge", "a", a).await.unwrap();
    let a2 = acquire(db, "purge", "a", 50).await.unwrap().expect("released, so free");
    assert!(a2 > a);
    tokio::time::sleep(Duration::from_millis(120)).await;
    let b = acquire(db, "purge", "b", 60_000).await.unwrap().expect("expired, so free");
    assert!(b > a2);
    assert!(!renew(db, "purge", "a", a2, 60_000).await.unwrap(), "the stale holder's renewal matches nothing");
    release(db, "purge", "a", a2).await.unwrap();
    let now = current(db, "purge").await.unwrap().unwrap();
    assert_eq!((now.holder.as_str(), now.epoch), ("b", b), "a stale release leaves the new holder's lease alone");
    assert!(now.expires_at > domain::clock::now_ms());
});

db_test!(concurrent_takers_get_one_lease, async |t: &TestDb| {
    let mut tasks = Vec::new();
    for n in 0..8 {
        let db = t.db.clone();
        tasks.push(tokio::spawn(async move { acquire(&db, "relay", &format!("p{n}"), 60_000).await }));
    }
    let mut won = 0;
    for task in tasks {
        // On SQLite a taker may find the database busy; it tries at its next tick.
        if let Ok(Some(_)) = task.await.unwrap() {
            won += 1;
        }
    }
    assert_eq!(won, 1, "exactly one of eight concurrent takers holds the lease");
});

// The clock the leases read, against this process's: on one machine the
// two agree to within the query's round trip (a unit or epoch slip in either
// engine's expression would be off by hours or decades).
db_test!(the_databases_clock_reads_as_this_process_does, async |t: &TestDb| {
    let o = domain::clock_offset::measure(&t.db).await.unwrap();
    assert!(o.offset_ms.abs() <= 1000 + o.uncertainty_ms, "{o:?}");
    assert!(!o.beyond(domain::clock_offset::MAX_START_OFFSET_MS));
});
