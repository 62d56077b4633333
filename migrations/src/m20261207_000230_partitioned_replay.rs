//! Replay records partitioned by day of their signed timestamp on
//! PostgreSQL (issue 28 item 1), so the purge drops a day of them whole
//! instead of deleting them row by row.
//!
//! A replay record must refuse every later copy of its signed message. For
//! schemes that sign a timestamp the record's digest covers that timestamp,
//! so every copy of one message carries the same `signed_at` and names the
//! same day's partition: a unique key holding `signed_at` (PostgreSQL needs
//! the partition column in it) refuses exactly what the old key did. A day
//! can go once no message signed in it can pass the timestamp gate any more
//! (`domain::retention::partitions`).
//!
//! The records of schemes that sign no timestamp (GitHub, `hmac` profiles
//! without one) are kept for the dedup retention; they carry `signed_at = 0`
//! and live in `replay_records_unsigned`, the one partition below every day,
//! where the purge still deletes them by expiry through its own index.
//!
//! Records stored before this migration do not know their signed timestamp,
//! so they are copied with 0 too. For a message signed before
//! `endpoints.replay_partitioned_from` (set here to two hours from now, past
//! the longest tolerance with margin for instances' clocks) the receiver
//! also writes 0: a replay of a message recorded before the upgrade meets
//! its old record, and no message is refused for being in flight across it.
//! Two hours on, every message it accepts is signed later and goes to its day.
//!
//! SQLite is not partitioned; it gets the same column and key (rebuilt), so
//! both engines run the same statements. On PostgreSQL the old table is
//! locked, copied and dropped in this one transaction: intake waits for as
//! long as the copy of the records held takes (a few minutes' worth of
//! timestamped records, and GitHub's for their retention); `endpoints` is
//! altered last, so the console and endpoint loads wait only for the commit.
//! An instance of an older build fails its replay inserts afterwards:
//! upgrade every instance together.

use sea_orm_migration::{prelude::*, sea_orm::DbBackend};

use crate::{
    m20261206_000121_tenant_keys::rebuild_sqlite,
    partitioning::{self, DAY_MS, LOCK_KEY},
};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Days after today given partitions (a frozen copy of the server's horizon).
const AHEAD_DAYS: i64 = 3;
/// How long after the upgrade a signed message still gets the old records'
/// `signed_at = 0`: twice the longest tolerance (`MAX_TOLERANCE_SECS`).
const OLD_RECORDS_FOR_SECS: i64 = 7_200;

const KEY: [&str; 4] = ["tenant_id", "endpoint_id", "message_digest", "signed_at"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let c = m.get_connection();
        let now_ms = now_ms();
        if m.get_database_backend() == DbBackend::Sqlite {
            // SQLite adds a NOT NULL column only with a default, which the
            // rebuild keeps (the receiver always names `signed_at`).
            c.execute_unprepared("ALTER TABLE replay_records ADD COLUMN signed_at BIGINT NOT NULL DEFAULT 0").await?;
            rebuild_sqlite(c, "replay_records", &KEY, &[]).await?;
        } else {
            partition_postgres(c, now_ms).await?;
        }
        // Last: altering `endpoints` locks it until the commit, and every
        // console page and endpoint load reads it.
        c.execute_unprepared("ALTER TABLE endpoints ADD COLUMN replay_partitioned_from BIGINT").await?;
        c.execute_unprepared(&format!(
            "UPDATE endpoints SET replay_partitioned_from = {} WHERE scheme <> 'github'",
            now_ms / 1000 + OLD_RECORDS_FOR_SECS
        ))
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let c = m.get_connection();
        // One message has one `signed_at`, so the old key holds every row.
        if m.get_database_backend() == DbBackend::Sqlite {
            rebuild_sqlite(c, "replay_records", &KEY[..3], &["signed_at"]).await?;
        } else {
            c.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
            c.execute_unprepared("LOCK TABLE replay_records IN ACCESS EXCLUSIVE MODE").await?;
            c.execute_unprepared("ALTER TABLE replay_records RENAME TO replay_records_after").await?;
            c.execute_unprepared(
                "ALTER TABLE replay_records_after RENAME CONSTRAINT replay_records_pkey TO replay_records_after_pkey",
            )
            .await?;
            c.execute_unprepared(
                "CREATE TABLE replay_records (endpoint_id varchar NOT NULL, message_digest varchar NOT NULL, \
                 expires_at BIGINT NOT NULL, tenant_id varchar NOT NULL, \
                 CONSTRAINT replay_records_pkey PRIMARY KEY (tenant_id, endpoint_id, message_digest))",
            )
            .await?;
            c.execute_unprepared(
                "INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, expires_at) \
                 SELECT tenant_id, endpoint_id, message_digest, expires_at FROM replay_records_after",
            )
            .await?;
            c.execute_unprepared("DROP TABLE replay_records_after").await?;
            c.execute_unprepared("CREATE INDEX ix_replay_expires ON replay_records (expires_at)").await?;
        }
        c.execute_unprepared("ALTER TABLE endpoints DROP COLUMN replay_partitioned_from").await?;
        Ok(())
    }
}

/// The PostgreSQL layout: the old table renamed aside, the partitioned one
/// created with the unsigned partition and the days around today, every
/// record copied with `signed_at = 0`, the old table dropped.
async fn partition_postgres(c: &SchemaManagerConnection<'_>, now_ms: i64) -> Result<(), DbErr> {
    c.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({LOCK_KEY})")).await?;
    c.execute_unprepared("LOCK TABLE replay_records IN ACCESS EXCLUSIVE MODE").await?;
    c.execute_unprepared("ALTER TABLE replay_records RENAME TO replay_records_before").await?;
    c.execute_unprepared(
        "ALTER TABLE replay_records_before RENAME CONSTRAINT replay_records_pkey TO replay_records_before_pkey",
    )
    .await?;
    c.execute_unprepared(
        "CREATE TABLE replay_records (tenant_id varchar NOT NULL, endpoint_id varchar NOT NULL, \
         message_digest varchar NOT NULL, signed_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, \
         CONSTRAINT replay_records_pkey PRIMARY KEY (tenant_id, endpoint_id, message_digest, signed_at)) \
         PARTITION BY RANGE (signed_at)",
    )
    .await?;
    c.execute_unprepared(
        "CREATE TABLE replay_records_unsigned PARTITION OF replay_records FOR VALUES FROM (MINVALUE) TO (1)",
    )
    .await?;
    c.execute_unprepared("CREATE INDEX ix_replay_unsigned_expires ON replay_records_unsigned (expires_at)").await?;
    // Yesterday too while a message signed in it can still be accepted
    // (the purge drops it after as long: `REPLAY_DAY_KEPT_MS`).
    let today = partitioning::day_of(now_ms);
    let first = if now_ms - today * DAY_MS < OLD_RECORDS_FOR_SECS * 1000 { today - 1 } else { today };
    for day in first..=today + AHEAD_DAYS {
        c.execute_unprepared(&partitioning::create_sql("replay_records", 1, day)).await?;
    }
    c.execute_unprepared(
        "INSERT INTO replay_records (tenant_id, endpoint_id, message_digest, signed_at, expires_at) \
         SELECT tenant_id, endpoint_id, message_digest, 0, expires_at FROM replay_records_before",
    )
    .await?;
    c.execute_unprepared("DROP TABLE replay_records_before").await?;
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
