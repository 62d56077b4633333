//! Connections and transactions for both engines.
//!
//! SQLite runs in WAL mode with a busy timeout, and every write transaction
//! starts with `BEGIN IMMEDIATE`: a deferred transaction that reads before it
//! writes cannot upgrade once another writer has committed (SQLITE_BUSY that no
//! busy timeout cures). PostgreSQL uses its default READ COMMITTED; invariants
//! are carried by constraints and row locks, never by check-then-insert.

use std::time::Duration;

use migrations::{Migrator, MigratorTrait};
use sea_orm::{
    AccessMode, ConnectOptions, Database, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, IsolationLevel,
    SqlErr, SqliteTransactionMode, TransactionOptions, TransactionTrait,
    sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous},
};

/// The PostgreSQL pool's size unless configured (`SIGNET_PG_POOL_SIZE`).
/// Each process opens up to this many connections, and PostgreSQL's
/// default `max_connections` is 100: three processes at 32 leave a few for
/// everything else, so a deployment with more sets it lower.
pub const DEFAULT_PG_POOL_SIZE: u32 = 32;

/// The SQLite pool's size: one writer at a time (`BEGIN IMMEDIATE`), and
/// readers beside it in WAL mode.
const SQLITE_POOL_SIZE: u32 = 8;

/// Opens a pool for `url` (`sqlite://…` or `postgres://…`), PostgreSQL's of
/// the default size.
pub async fn connect(url: &str) -> Result<DatabaseConnection, DbErr> {
    connect_with(url, DEFAULT_PG_POOL_SIZE).await
}

/// Opens a pool for `url`; on PostgreSQL it holds at most `pg_pool_size`
/// connections (SQLite's size is fixed).
pub async fn connect_with(url: &str, pg_pool_size: u32) -> Result<DatabaseConnection, DbErr> {
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .sqlx_logging(false)
        .connect_timeout(Duration::from_secs(10))
        .acquire_timeout(Duration::from_secs(10))
        // sqlx pings a pooled connection on every checkout by default: one
        // more round trip per webhook than the claim transaction itself
        // needs. Only a connection idle long enough to have been dropped
        // (by a proxy, a firewall) is pinged. One the database ended while
        // it was hot (a restart) fails its first statement, is closed when
        // it returns to the pool, and the receiver retries on another (see
        // `is_lost_connection`).
        .test_before_acquire_if_idle_for(Duration::from_secs(5));
    if url.starts_with("sqlite:") {
        options.max_connections(SQLITE_POOL_SIZE).map_sqlx_sqlite_opts(|o| {
            o.journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true)
        });
    } else {
        options.max_connections(pg_pool_size);
    }
    Database::connect(options).await
}

/// Runs pending migrations; idempotent.
pub async fn migrate(db: &DatabaseConnection) -> Result<(), DbErr> {
    Migrator::up(db, None).await
}

/// Starts a read-only transaction whose reads all see one snapshot:
/// REPEATABLE READ on PostgreSQL; on SQLite a deferred transaction, whose
/// first read fixes what the rest see.
pub async fn begin_snapshot(db: &DatabaseConnection) -> Result<DatabaseTransaction, DbErr> {
    match db.get_database_backend() {
        DbBackend::Postgres => {
            db.begin_with_options(TransactionOptions {
                isolation_level: Some(IsolationLevel::RepeatableRead),
                access_mode: Some(AccessMode::ReadOnly),
                ..Default::default()
            })
            .await
        }
        _ => db.begin().await,
    }
}

/// Starts a transaction that will write.
pub async fn begin_write(db: &DatabaseConnection) -> Result<DatabaseTransaction, DbErr> {
    match db.get_database_backend() {
        DbBackend::Sqlite => {
            db.begin_with_options(TransactionOptions {
                sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
                ..Default::default()
            })
            .await
        }
        _ => db.begin().await,
    }
}

/// True for failures worth retrying: the database is unreachable or busy,
/// or the engine aborted the transaction to resolve a conflict
/// (PostgreSQL serialization failure 40001 / deadlock 40P01; SQLite
/// BUSY/LOCKED, including their extended codes). Classified by error code,
/// never by message text.
pub fn is_transient(err: &DbErr) -> bool {
    use sea_orm::sqlx;
    if matches!(err, DbErr::ConnectionAcquire(_) | DbErr::Conn(_)) {
        return true;
    }
    let Some(sqlx_err) = statement_error(err) else { return false };
    match sqlx_err {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => match db.code().as_deref() {
            Some("40001" | "40P01" | "57P01" | "08006" | "08003") => true,
            // SQLite primary codes 5 (BUSY) and 6 (LOCKED), with extended
            // codes carrying the primary in the low byte.
            Some(code) => code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6)),
            None => false,
        },
        _ => false,
    }
}

/// Pooled connections are not pinged while in use (see `connect`), so after a
/// database restart every idle one fails its first statement. Each such
/// failure discards that connection; up to a pool's worth of them (this
/// pool's size) are retried at once.
pub fn lost_connection_retries(db: &DatabaseConnection) -> u32 {
    match db.get_database_backend() {
        DbBackend::Postgres => db.get_postgres_connection_pool().options().get_max_connections(),
        _ => SQLITE_POOL_SIZE,
    }
}

/// True when a statement failed because its pooled connection was gone: the
/// database ended it (57P01/57P02 on a restart or `pg_terminate_backend`) or
/// the socket broke. The connection is discarded when it goes back to the
/// pool, so another one can be tried at once. Failing to open a connection
/// is a different error (`DbErr::Conn`) and is not this.
///
/// The transaction may still have committed if this was its COMMIT; callers
/// must treat the outcome as unknown, not as rolled back.
pub fn is_lost_connection(err: &DbErr) -> bool {
    use sea_orm::sqlx;
    match statement_error(err) {
        Some(sqlx::Error::Io(_)) => true,
        Some(sqlx::Error::Database(db)) => matches!(db.code().as_deref(), Some("57P01" | "57P02")),
        _ => false,
    }
}

/// The driver's error behind a failed statement (not a failed checkout).
fn statement_error(err: &DbErr) -> Option<&sea_orm::sqlx::Error> {
    use sea_orm::RuntimeErr;
    match err {
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => Some(e),
        _ => None,
    }
}

/// The error [`is_lost_connection`] recognises (for the fault points).
pub fn lost_connection_error() -> DbErr {
    use sea_orm::{RuntimeErr, sqlx};
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection lost before the answer arrived");
    DbErr::Query(RuntimeErr::SqlxError(std::sync::Arc::new(sqlx::Error::Io(io))))
}

/// True when the error is a unique-constraint violation (classified by the
/// driver's error code, not by message text).
pub fn is_unique_violation(err: &DbErr) -> bool {
    matches!(err.sql_err(), Some(SqlErr::UniqueConstraintViolation(_)))
}

/// For `map_err` on an insert: a unique violation becomes this conflict
/// (the constraint said no), anything else stays a database error.
pub fn conflict_if_unique(
    code: &'static str,
    message: impl Into<String>,
) -> impl FnOnce(DbErr) -> crate::error::DomainError {
    move |e| if is_unique_violation(&e) { crate::error::DomainError::conflict(code, message) } else { e.into() }
}
