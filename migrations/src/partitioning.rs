//! Daily range partitions on PostgreSQL: their names, bounds and the lock
//! that serialises every change to them. Shared by the migration that makes
//! the tables partitioned and by the server's upkeep and purge, so both name
//! and bound a day's partition the same way (the purge reads a partition's
//! day back from its name).

use sea_orm_migration::{
    prelude::*,
    sea_orm::{DbBackend, Statement},
};

/// Milliseconds in a UTC day: one partition each.
pub const DAY_MS: i64 = 86_400_000;

/// `pg_advisory_xact_lock` key held by whatever creates, drops or converts
/// partitions. `CREATE TABLE IF NOT EXISTS … PARTITION OF` is not safe on its
/// own: two sessions creating the same partition at once can both pass the
/// existence check and one fails on the catalog's unique index.
pub const LOCK_KEY: i64 = 0x5349_474e_5041_5254;

/// Lists a parent's partitions (their names); `$1` is the parent's name.
pub const LIST_SQL: &str = "SELECT c.relname::text AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
                            WHERE i.inhparent = to_regclass($1)";

/// The UTC day (days since 1970-01-01) holding `ms`.
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

/// `<parent>_pYYYYMMDD`.
pub fn partition_name(parent: &str, day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{parent}_p{y:04}{m:02}{d:02}")
}

/// The day a partition of `parent` named by [`partition_name`] holds.
pub fn partition_day(parent: &str, name: &str) -> Option<i64> {
    let digits = name.strip_prefix(parent)?.strip_prefix("_p")?;
    if digits.len() != 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (y, m, d) = (digits[..4].parse().ok()?, digits[4..6].parse().ok()?, digits[6..].parse().ok()?);
    let day = days_from_civil(y, m, d);
    (civil_from_days(day) == (y, m, d)).then_some(day)
}

/// Creates `day`'s partition of `parent`, whose partition column counts
/// units of `unit_ms` (1 for milliseconds, 60 000 for minutes, …).
pub fn create_sql(parent: &str, unit_ms: i64, day: i64) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {name} PARTITION OF {parent} FOR VALUES FROM ({from}) TO ({to})",
        name = partition_name(parent, day),
        from = day * DAY_MS / unit_ms,
        to = (day + 1) * DAY_MS / unit_ms,
    )
}

/// Wall-clock milliseconds, for the migrations' horizon of partitions.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Whether `table` is a partitioned table (PostgreSQL).
pub async fn partitioned(conn: &SchemaManagerConnection<'_>, table: &str) -> Result<bool, DbErr> {
    let row = conn
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            format!("SELECT (relkind = 'p') AS p FROM pg_class WHERE oid = to_regclass('{table}')"),
        ))
        .await?;
    row.map_or(Ok(false), |r| r.try_get::<bool>("", "p"))
}

/// Converts the plain table `table` into daily range partitions of `column`
/// (in ms) keyed by `pk`, with a partition for every day holding rows and
/// for today and `ahead_days` more, under the partition lock and an ACCESS
/// EXCLUSIVE lock on the table. Does nothing if it already is partitioned.
pub async fn partition_by_day(
    conn: &SchemaManagerConnection<'_>,
    table: &'static str,
    column: &str,
    pk: &str,
    ahead_days: i64,
) -> Result<(), DbErr> {
    if !lock_for_conversion(conn, table, false).await? {
        return Ok(());
    }
    let today = day_of(now_ms());
    let plan = Rebuild::start(conn, table).await?;
    let days = days_with_rows(conn, &plan.old, column, 1, "TRUE").await?;
    plan.create(conn, &format!("PARTITION BY RANGE ({column})")).await?;
    for day in days.into_iter().chain(today..=today + ahead_days) {
        conn.execute_unprepared(&create_sql(table, 1, day)).await?;
    }
    plan.finish(conn, pk).await
}

/// Converts the partitioned `table` back into a plain table keyed by `pk`,
/// under the same locks. Does nothing if it is not partitioned.
pub async fn unpartition(conn: &SchemaManagerConnection<'_>, table: &'static str, pk: &str) -> Result<(), DbErr> {
    if !lock_for_conversion(conn, table, true).await? {
        return Ok(());
    }
    let plan = Rebuild::start(conn, table).await?;
    plan.create(conn, "").await?;
    plan.finish(conn, pk).await
}

/// Takes the partition lock (the server's upkeep holds it while it adds
/// partitions), then, if `table` is partitioned as `from_partitioned` says,
/// an ACCESS EXCLUSIVE lock on it; `false` when there is nothing to convert.
pub async fn lock_for_conversion(
    conn: &SchemaManagerConnection<'_>,
    table: &str,
    from_partitioned: bool,
) -> Result<bool, DbErr> {
    conn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
    if partitioned(conn, table).await? != from_partitioned {
        return Ok(false);
    }
    conn.execute_unprepared(&format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")).await?;
    Ok(true)
}

/// The distinct UTC days of `column` (in units of `unit_ms`) among `old`'s
/// rows matching `filter`.
pub async fn days_with_rows(
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
pub struct Rebuild {
    table: &'static str,
    pub old: String,
    indexes: Vec<String>,
}

impl Rebuild {
    pub async fn start(conn: &SchemaManagerConnection<'_>, table: &'static str) -> Result<Rebuild, DbErr> {
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
    pub async fn create(&self, conn: &SchemaManagerConnection<'_>, tail: &str) -> Result<(), DbErr> {
        let (table, old) = (self.table, &self.old);
        conn.execute_unprepared(&format!("CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS) {tail}")).await?;
        Ok(())
    }

    /// Copies the rows, drops the old table (its index names are then free)
    /// and adds the primary key and the indexes.
    pub async fn finish(self, conn: &SchemaManagerConnection<'_>, pk: &str) -> Result<(), DbErr> {
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

// Howard Hinnant's civil-calendar algorithms (proleptic Gregorian, UTC).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        // 2026-12-06T00:00:00Z
        let day = day_of(1_796_515_200_000);
        assert_eq!(partition_name("delivery_log", day), "delivery_log_p20261206");
        assert_eq!(partition_day("delivery_log", "delivery_log_p20261206"), Some(day));
        assert_eq!(partition_name("t", 0), "t_p19700101");
        assert_eq!(partition_name("t", 19_782), "t_p20240229");
        for d in [-1, 0, 59, 10_000, 20_000, 30_000] {
            assert_eq!(partition_day("t", &partition_name("t", d)), Some(d));
        }
        for bad in ["t_p2026120", "t_p20261306", "t_p20260230", "u_p20261206", "t_20261206", "t_p2026120x"] {
            assert_eq!(partition_day("t", bad), None, "{bad}");
        }
        assert_eq!(
            create_sql("event_rollups", 60_000, day),
            format!(
                "CREATE TABLE IF NOT EXISTS event_rollups_p20261206 PARTITION OF event_rollups FOR VALUES FROM ({}) TO \
                 ({})",
                day * 1440,
                day * 1440 + 1440
            )
        );
    }
}
