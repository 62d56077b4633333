//! `--bulk`: the claims inserted by SQL in large chunks with their indexes
//! dropped and rebuilt around them, and bodies of the sealed size written
//! by SQL beside them (`bench/scale.sh`).

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use super::{exec, series};

/// `bench_endpoints`: endpoint ids numbered from 0, for the inserts below.
pub(super) const BENCH_ENDPOINTS: &str =
    "CREATE TABLE bench_endpoints AS SELECT ROW_NUMBER() OVER (ORDER BY id) - 1 AS i, id, tenant_id FROM endpoints";

/// `count` claims numbered from `offset` (of `total`), event ids
/// `<prefix><number>`, received from `end` back over `span_ms`, round robin
/// over `bench_endpoints`.
pub(super) struct ClaimRows<'a> {
    pub(super) prefix: &'a str,
    pub(super) offset: i64,
    pub(super) count: i64,
    pub(super) end: i64,
    pub(super) span_ms: i64,
    pub(super) total: i64,
    pub(super) n_ep: i64,
}

impl ClaimRows<'_> {
    fn rows(&self, b: DbBackend) -> String {
        let ClaimRows { prefix, offset, count, end, span_ms, total, n_ep } = *self;
        format!(
            "SELECT e.tenant_id, e.id AS endpoint_id, '{prefix}' || CAST(s.n + {offset} AS TEXT) AS event_id, \
                    {end} - ((CAST(s.n AS BIGINT) + {offset}) * {span_ms} / {total}) AS received_at \
             FROM ({series}) s JOIN bench_endpoints e ON e.i = (s.n + {offset}) % {n_ep}",
            series = series(b, count),
        )
    }

    /// The claims' insert, then with `body` the insert of the bodies of
    /// those received since its `since`.
    pub(super) fn insert(&self, b: DbBackend, body: Option<&BulkBody>) -> Vec<String> {
        let rows = self.rows(b);
        let Some(BulkBody { hex, kek, since }) = body else {
            return vec![format!(
                "INSERT INTO inbox_claims \
                     (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at) \
                 SELECT r.tenant_id, r.endpoint_id, r.event_id, 'digest', 'reminder.created', 'key', 'applied', \
                        r.received_at \
                 FROM ({rows}) r"
            )];
        };
        let digest = "d".repeat(64);
        vec![
            format!(
                "INSERT INTO inbox_claims \
                     (tenant_id, endpoint_id, event_id, body_digest, event_type, key_id, outcome, received_at, \
                      first_answer, message_digest) \
                 SELECT r.tenant_id, r.endpoint_id, r.event_id, '{digest}', 'reminder.created', 'key', \
                        'applied', r.received_at, 'applied', '{digest}' \
                 FROM ({rows}) r"
            ),
            format!(
                "INSERT INTO event_bodies \
                     (tenant_id, endpoint_id, event_id, received_at, filed_at, kek_version, body_ciphertext) \
                 SELECT r.tenant_id, r.endpoint_id, r.event_id, r.received_at, r.received_at, {kek}, \
                        '\\x{hex}'::bytea \
                 FROM ({rows}) r WHERE r.received_at >= {since}"
            ),
        ]
    }
}

/// `--bulk`'s body: one 1 KiB body sealed as the receiver seals it (so the
/// stored size is the real one), for every claim received since `since`.
pub(super) struct BulkBody {
    hex: String,
    kek: u32,
    since: i64,
}

impl BulkBody {
    pub(super) async fn sealed(db: &DatabaseConnection, vault: &domain::vault::Vault, since: i64) -> Self {
        vault.reserve_seals(db, 1).await.expect("reserve a seal");
        let aad = domain::crypto::Aad::event_body("tenant", "endpoint", "evt_0");
        let (sealed, kek) = vault.seal(&aad, &[b'x'; 1024]).expect("seal");
        let hex = sealed.iter().map(|b| format!("{b:02x}")).collect();
        BulkBody { hex, kek, since }
    }
}

/// The claims' primary key, constraints and indexes as PostgreSQL describes
/// them: (name, constraint definition if it is one, index definition).
async fn claim_indexes(db: &DatabaseConnection) -> Vec<(String, Option<String>, String)> {
    let rows = db
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT ci.relname AS name, pg_get_constraintdef(c.oid) AS con, pg_get_indexdef(i.indexrelid) AS def \
             FROM pg_index i JOIN pg_class ci ON ci.oid = i.indexrelid \
             LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid \
             WHERE i.indrelid = 'inbox_claims'::regclass ORDER BY 1",
        ))
        .await
        .expect("the claims' indexes");
    rows.iter()
        .map(|r| {
            (
                r.try_get("", "name").expect("name"),
                r.try_get("", "con").expect("con"),
                r.try_get("", "def").expect("def"),
            )
        })
        .collect()
}

/// Drops every index of the claims (constraints through `ALTER TABLE`) and
/// returns their definitions.
pub(super) async fn drop_claim_indexes(db: &DatabaseConnection) -> Vec<(String, Option<String>, String)> {
    let indexes = claim_indexes(db).await;
    for (name, con, _) in &indexes {
        match con {
            Some(_) => exec(db, format!("ALTER TABLE inbox_claims DROP CONSTRAINT \"{name}\"")).await,
            None => exec(db, format!("DROP INDEX \"{name}\"")).await,
        }
    }
    indexes
}

/// Rebuilds what [`drop_claim_indexes`] dropped, from its own definitions,
/// and checks that PostgreSQL describes the result as before.
pub(super) async fn rebuild_claim_indexes(db: &DatabaseConnection, dropped: &[(String, Option<String>, String)]) {
    use sea_orm::TransactionTrait;
    for (name, con, def) in dropped {
        let txn = db.begin().await.expect("begin");
        txn.execute_unprepared("SET LOCAL maintenance_work_mem = '1GB'").await.expect("work memory");
        let sql = match con {
            Some(con) => format!("ALTER TABLE inbox_claims ADD CONSTRAINT \"{name}\" {con}"),
            None => def.clone(),
        };
        txn.execute_unprepared(&sql).await.unwrap_or_else(|e| panic!("{e}: {sql}"));
        txn.commit().await.expect("commit");
    }
    assert_eq!(claim_indexes(db).await, dropped, "the claims' indexes differ from the migrated ones");
}
