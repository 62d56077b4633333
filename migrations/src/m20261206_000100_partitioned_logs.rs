//! Issue 28 item 1, first landing: on PostgreSQL the append-only tables that
//! grow with traffic and need no uniqueness across days become daily range
//! partitions, so the purge drops a day instead of deleting its rows:
//! `delivery_log` (by `answered_at`), the minute and hourly event rollups,
//! the key use and failure rollups (by their time bucket) and
//! `gauge_samples` (listed by `unit`, each unit then by `bucket`).
//!
//! Each table is rebuilt in this migration's one transaction under an
//! ACCESS EXCLUSIVE lock on all six (taken at once, so no writer can
//! interleave): partitions for every day holding rows and for today and
//! [`AHEAD_DAYS`] more, a copy of every row, the swap of names, then the
//! primary key and the table's other indexes as they were. The primary keys
//! gain `tenant_id` where it was missing (the key rollups), as every key of
//! a table to be distributed by tenant must.
//!
//! SQLite is unchanged.

use sea_orm_migration::{
    prelude::*,
    sea_orm::{DbBackend, Statement},
};

use crate::partitioning::{self, DAY_MS, LOCK_KEY};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Days after today given partitions (a frozen copy of the server's horizon).
const AHEAD_DAYS: i64 = 3;

/// A table partitioned by range of `column` (in units of `unit_ms`).
struct Ranged {
    table: &'static str,
    column: &'static str,
    unit_ms: i64,
    pk: &'static str,
    old_pk: &'static str,
}

const RANGED: [Ranged; 5] = [
    Ranged { table: "delivery_log", column: "answered_at", unit_ms: 1, pk: "tenant_id, id, answered_at", old_pk: "id" },
    Ranged {
        table: "event_rollups",
        column: "minute",
        unit_ms: 60_000,
        pk: "minute, tenant_id, endpoint_id, outcome, reason",
        old_pk: "minute, tenant_id, endpoint_id, outcome, reason",
    },
    Ranged {
        table: "event_rollups_hourly",
        column: "hour",
        unit_ms: 3_600_000,
        pk: "hour, tenant_id, endpoint_id, outcome, reason",
        old_pk: "hour, tenant_id, endpoint_id, outcome, reason",
    },
    Ranged {
        table: "key_use_rollups",
        column: "hour",
        unit_ms: 3_600_000,
        pk: "hour, tenant_id, key_id",
        old_pk: "hour, key_id",
    },
    Ranged {
        table: "key_failure_rollups",
        column: "hour",
        unit_ms: 3_600_000,
        pk: "hour, tenant_id, key_id, reason",
        old_pk: "hour, key_id, reason",
    },
];

/// `gauge_samples` holds minute and hour buckets side by side: listed by
/// unit first, so each unit's buckets are ranged in its own unit.
const GAUGES: &str = "gauge_samples";
const GAUGE_UNITS: [(&str, i64); 2] = [("minute", 60_000), ("hour", 3_600_000)];
const GAUGE_PK: &str = "unit, tenant_id, bucket, name";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        let conn = m.get_connection();
        // The server's upkeep holds the same lock while it adds partitions.
        conn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
        if partitioned(conn, "delivery_log").await? {
            return Ok(());
        }
        lock_all(conn).await?;
        let today = partitioning::day_of(now_ms());
        let ahead: Vec<i64> = (today..=today + AHEAD_DAYS).collect();
        for t in &RANGED {
            let plan = Rebuild::start(conn, t.table).await?;
            let days = days_with_rows(conn, &plan.old, t.column, t.unit_ms, "TRUE").await?;
            plan.create(conn, &format!("PARTITION BY RANGE ({})", t.column)).await?;
            for day in days.iter().chain(&ahead) {
                conn.execute_unprepared(&partitioning::create_sql(t.table, t.unit_ms, *day)).await?;
            }
            plan.finish(conn, t.pk).await?;
        }
        let plan = Rebuild::start(conn, GAUGES).await?;
        let mut by_unit = Vec::new();
        for (unit, unit_ms) in GAUGE_UNITS {
            by_unit.push(days_with_rows(conn, &plan.old, "bucket", unit_ms, &format!("unit = '{unit}'")).await?);
        }
        plan.create(conn, "PARTITION BY LIST (unit)").await?;
        for ((unit, unit_ms), days) in GAUGE_UNITS.into_iter().zip(by_unit) {
            let sub = format!("{GAUGES}_{unit}");
            conn.execute_unprepared(&format!(
                "CREATE TABLE {sub} PARTITION OF {GAUGES} FOR VALUES IN ('{unit}') PARTITION BY RANGE (bucket)"
            ))
            .await?;
            for day in days.iter().chain(&ahead) {
                conn.execute_unprepared(&partitioning::create_sql(&sub, unit_ms, *day)).await?;
            }
        }
        plan.finish(conn, GAUGE_PK).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        let conn = m.get_connection();
        conn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
        if !partitioned(conn, "delivery_log").await? {
            return Ok(());
        }
        lock_all(conn).await?;
        for (table, pk) in RANGED.iter().map(|t| (t.table, t.old_pk)).chain([(GAUGES, GAUGE_PK)]) {
            let plan = Rebuild::start(conn, table).await?;
            plan.create(conn, "").await?;
            plan.finish(conn, pk).await?;
        }
        Ok(())
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

async fn partitioned(conn: &SchemaManagerConnection<'_>, table: &str) -> Result<bool, DbErr> {
    let row = conn
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            format!("SELECT (relkind = 'p') AS p FROM pg_class WHERE oid = to_regclass('{table}')"),
        ))
        .await?;
    row.map_or(Ok(false), |r| r.try_get::<bool>("", "p"))
}

/// One statement for all six, so a writer holding one of them cannot
/// deadlock against the rebuild.
async fn lock_all(conn: &SchemaManagerConnection<'_>) -> Result<(), DbErr> {
    let tables: Vec<&str> = RANGED.iter().map(|t| t.table).chain([GAUGES]).collect();
    conn.execute_unprepared(&format!("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE", tables.join(", "))).await?;
    Ok(())
}

/// The distinct UTC days of `column` (in units of `unit_ms`) among `old`'s
/// rows matching `filter`.
async fn days_with_rows(
    conn: &SchemaManagerConnection<'_>,
    old: &str,
    column: &str,
    unit_ms: i64,
    filter: &str,
) -> Result<Vec<i64>, DbErr> {
    let per_day = DAY_MS / unit_ms;
    let rows = conn
        .query_all_raw(Statement::from_string(
            DbBackend::Postgres,
            format!("SELECT DISTINCT floor({column}::numeric / {per_day})::bigint AS day FROM {old} WHERE {filter}"),
        ))
        .await?;
    rows.iter().map(|r| r.try_get::<i64>("", "day")).collect()
}

/// A table rebuilt under its own name: the old one is renamed aside, a new
/// one made like it, the rows copied, the old one dropped, then the keys.
struct Rebuild {
    table: &'static str,
    old: String,
    indexes: Vec<String>,
}

impl Rebuild {
    async fn start(conn: &SchemaManagerConnection<'_>, table: &'static str) -> Result<Rebuild, DbErr> {
        // Every index but the primary key, as PostgreSQL itself writes it
        // (`CREATE INDEX name ON public.table …`): recreated on the new table.
        let indexes = conn
            .query_all_raw(Statement::from_string(
                DbBackend::Postgres,
                format!(
                    "SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index \
                     WHERE indrelid = to_regclass('{table}') AND NOT indisprimary ORDER BY indexrelid"
                ),
            ))
            .await?
            .iter()
            // A partitioned parent's read back as `ON ONLY`: the copy is built whole.
            .map(|r| r.try_get::<String>("", "def").map(|d| d.replacen(" ON ONLY ", " ON ", 1)))
            .collect::<Result<Vec<_>, _>>()?;
        let old = format!("{table}_rebuilt");
        conn.execute_unprepared(&format!("ALTER TABLE {table} RENAME TO {old}")).await?;
        Ok(Rebuild { table, old, indexes })
    }

    /// The new table, like the old one; `tail` is its PARTITION BY clause.
    async fn create(&self, conn: &SchemaManagerConnection<'_>, tail: &str) -> Result<(), DbErr> {
        let (table, old) = (self.table, &self.old);
        conn.execute_unprepared(&format!("CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS) {tail}")).await?;
        Ok(())
    }

    /// Copies the rows, drops the old table (its index names are then free)
    /// and adds the primary key and the indexes.
    async fn finish(self, conn: &SchemaManagerConnection<'_>, pk: &str) -> Result<(), DbErr> {
        let (table, old) = (self.table, &self.old);
        conn.execute_unprepared(&format!("INSERT INTO {table} SELECT * FROM {old}")).await?;
        conn.execute_unprepared(&format!("DROP TABLE {old}")).await?;
        conn.execute_unprepared(&format!("ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY ({pk})")).await?;
        for def in &self.indexes {
            conn.execute_unprepared(def).await?;
        }
        Ok(())
    }
}
