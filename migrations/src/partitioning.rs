//! Daily range partitions on PostgreSQL: their names, bounds and the lock
//! that serialises every change to them. Shared by the migration that makes
//! the tables partitioned and by the server's upkeep and purge, so both name
//! and bound a day's partition the same way (the purge reads a partition's
//! day back from its name).

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
