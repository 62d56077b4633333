//! One claim per event across partitions (issue 28 item 1). On PostgreSQL
//! `inbox_claims` is partitioned by day of `received_at`, and a unique key
//! on a partitioned table must hold the partition column: its primary key
//! `(tenant_id, endpoint_id, event_id, received_at)` makes an event unique
//! within a day only. Every writer of claims therefore follows one rule,
//! inside its transaction and before inserting:
//!
//! 1. take `pg_advisory_xact_lock` on a 64-bit hash of each claim key it may
//!    insert ([`claim_lock`]), in one statement and in ascending order, after
//!    any replay record's ([`lock`]), so two transactions never wait on each
//!    other's locks in a cycle;
//! 2. probe every partition for those keys ([`claimed`]), in one statement;
//! 3. insert only the keys the probe did not find.
//!
//! A second writer of the same key waits at step 1 until the first commits
//! or rolls back; its probe is a new statement, so under READ COMMITTED it
//! sees the first one's claim. Two keys whose hashes collide share a lock:
//! they are serialised, never confused, since the probe compares the keys
//! themselves. The lock is released with the transaction, so the claim is
//! answered (after the commit) exactly as before.
//!
//! The probe reads every partition, not only those within the dedup
//! retention: a partition past retention still exists while it holds a
//! claim of an open quarantine entry (a redelivery of that event must stay a
//! duplicate, or a release would apply it a second time) and until the next
//! purge drops it; skipping it would leave two claims of one event.
//!
//! Replay records (gate 6) follow the same rule on their key (tenant,
//! endpoint, signed-message digest), partitioned by the day they were
//! written (`recorded_at`, m20261207_000181): [`message_lock`], then
//! [`replayed`], which counts only records not yet expired (a past day is
//! dropped once all of its records have expired, so an expired one may
//! linger there). The group commit takes all of a batch's locks, messages'
//! and claims', in one statement.
//!
//! SQLite's primary keys are the keys themselves: nothing here runs there,
//! and the inserts' `ON CONFLICT DO NOTHING` decides as it always did.

use std::collections::HashSet;

use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement, Value, sea_query::OnConflict};
use sha2::{Digest, Sha256};

/// (tenant, endpoint, event id).
pub(crate) type ClaimKey = (String, String, String);

/// Whether claims are partitioned, and the rule above applies.
pub(crate) fn partitioned<C: ConnectionTrait>(conn: &C) -> bool {
    conn.get_database_backend() == DbBackend::Postgres
}

/// The `ON CONFLICT DO NOTHING` of a claim insert, on whichever unique key
/// the engine has: the claim key on SQLite, which decides there; the
/// per-day key on PostgreSQL, after the probe decided.
pub(crate) fn on_any_conflict() -> OnConflict {
    OnConflict::new().do_nothing().to_owned()
}

/// The advisory lock key of a claim key: the first 8 bytes of a SHA-256
/// over its length-prefixed parts.
pub(crate) fn claim_lock(tenant_id: &str, endpoint_id: &str, event_id: &str) -> i64 {
    lock_key(b"signet.claim", [tenant_id, endpoint_id, event_id])
}

/// The advisory lock key of a replay record's key (the endpoint's signed
/// message), apart from every claim's.
pub(crate) fn message_lock(tenant_id: &str, endpoint_id: &str, message_digest: &str) -> i64 {
    lock_key(b"signet.replay", [tenant_id, endpoint_id, message_digest])
}

fn lock_key(kind: &[u8], parts: [&str; 3]) -> i64 {
    let mut h = Sha256::new();
    h.update(kind);
    for part in parts {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// Takes the transaction-scoped advisory locks of `messages` (replay
/// records' keys) and then of `claims`, each group in ascending order, each
/// key once, in one statement (PostgreSQL; `conn` must be a transaction).
/// Every writer takes its replay record's lock before its claim's (gate 6
/// before gate 9), so this one order holds across all of them and no two
/// transactions can wait on each other in a cycle.
pub(crate) async fn lock<C: ConnectionTrait>(conn: &C, messages: Vec<i64>, claims: Vec<i64>) -> Result<(), DbErr> {
    let mut keys = Vec::with_capacity(messages.len() + claims.len());
    for mut group in [messages, claims] {
        group.sort_unstable();
        group.dedup();
        keys.extend(group);
    }
    if keys.is_empty() {
        return Ok(());
    }
    // Volatile functions in the target list run after the sort, so the
    // locks are taken in the order of `o`.
    let rows = (1..=keys.len()).map(|i| format!("(${i}::bigint, {i})")).collect::<Vec<_>>().join(", ");
    let sql = format!("SELECT pg_advisory_xact_lock(k) FROM (VALUES {rows}) AS v(k, o) ORDER BY o");
    conn.execute_raw(Statement::from_sql_and_values(DbBackend::Postgres, sql, keys.into_iter().map(Value::from)))
        .await?;
    Ok(())
}

/// Of `keys`, those already claimed, in any partition (PostgreSQL). One
/// statement: each key is an index lookup in each partition.
pub(crate) async fn claimed<C: ConnectionTrait>(
    conn: &C,
    keys: &[(&str, &str, &str)],
) -> Result<HashSet<ClaimKey>, DbErr> {
    if keys.is_empty() {
        return Ok(HashSet::new());
    }
    let sql = format!(
        "SELECT c.tenant_id, c.endpoint_id, c.event_id FROM (VALUES {}) AS k(t, e, i) \
         JOIN inbox_claims c ON c.tenant_id = k.t AND c.endpoint_id = k.e AND c.event_id = k.i",
        key_rows(keys.len(), 1)
    );
    let mut found = HashSet::new();
    for row in conn.query_all_raw(Statement::from_sql_and_values(DbBackend::Postgres, sql, key_values(keys))).await? {
        found.insert((row.try_get("", "tenant_id")?, row.try_get("", "endpoint_id")?, row.try_get("", "event_id")?));
    }
    Ok(found)
}

/// Of the signed messages `keys` (tenant, endpoint, digest), those with a
/// replay record not yet expired at `now_ms`, in any partition
/// (PostgreSQL): (endpoint, digest) pairs. An expired record no longer
/// refuses, whether or not the purge has dropped its day yet.
pub(crate) async fn replayed<C: ConnectionTrait>(
    conn: &C,
    keys: &[(&str, &str, &str)],
    now_ms: i64,
) -> Result<HashSet<(String, String)>, DbErr> {
    if keys.is_empty() {
        return Ok(HashSet::new());
    }
    let sql = format!(
        "SELECT r.endpoint_id, r.message_digest FROM (VALUES {}) AS k(t, e, d) \
         JOIN replay_records r ON r.tenant_id = k.t AND r.endpoint_id = k.e AND r.message_digest = k.d \
         WHERE r.expires_at >= $1",
        key_rows(keys.len(), 2)
    );
    let values = std::iter::once(Value::from(now_ms)).chain(key_values(keys));
    let mut found = HashSet::new();
    for row in conn.query_all_raw(Statement::from_sql_and_values(DbBackend::Postgres, sql, values)).await? {
        found.insert((row.try_get("", "endpoint_id")?, row.try_get("", "message_digest")?));
    }
    Ok(found)
}

/// `n` rows of three text parameters for `VALUES`, numbered from `first`.
fn key_rows(n: usize, first: usize) -> String {
    let p = |i: usize, j: usize| first + 3 * i + j;
    (0..n)
        .map(|i| format!("(${}::text, ${}::text, ${}::text)", p(i, 0), p(i, 1), p(i, 2)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn key_values<'a>(keys: &'a [(&str, &str, &str)]) -> impl Iterator<Item = Value> + 'a {
    keys.iter().flat_map(|(a, b, c)| [Value::from(*a), Value::from(*b), Value::from(*c)])
}

/// Steps 1 and 2 for one key: `true` when it is already claimed. Does
/// nothing on SQLite (`false`: the insert decides).
pub(crate) async fn lock_and_probe<C: ConnectionTrait>(
    conn: &C,
    tenant_id: &str,
    endpoint_id: &str,
    event_id: &str,
) -> Result<bool, DbErr> {
    if !partitioned(conn) {
        return Ok(false);
    }
    lock(conn, Vec::new(), vec![claim_lock(tenant_id, endpoint_id, event_id)]).await?;
    Ok(!claimed(conn, &[(tenant_id, endpoint_id, event_id)]).await?.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_keys_are_stable_and_keep_the_parts_apart() {
        assert_eq!(claim_lock("t", "e", "i"), claim_lock("t", "e", "i"));
        assert_ne!(claim_lock("t", "e", "i"), claim_lock("t", "e", "j"));
        // Length prefixes: moving a boundary between parts is another key.
        assert_ne!(claim_lock("ab", "c", "i"), claim_lock("a", "bc", "i"));
    }
}
