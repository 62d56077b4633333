//! The audit chain becomes keyed (an HMAC under a key sealed in the vault),
//! and the audit table (`audit_log`) becomes append-only in the database itself.
//!
//! Entries written before the key existed keep their plain SHA-256 link
//! (`alg = 'sha256'`); the key's sealed binding records the first keyed
//! sequence number, so an entry cannot be moved back to the unkeyed form.
//! The triggers stop accidental or casual edits; they do not stop a database
//! owner, who can drop them: the MAC is what detects that.

use sea_orm_migration::{prelude::*, schema::*, sea_orm::DbBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    Alg,
}

#[derive(DeriveIden)]
enum AuditHead {
    Table,
    KeyId,
}

const PG_UP: &str = r#"
CREATE OR REPLACE FUNCTION signet_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;
DROP TRIGGER IF EXISTS audit_log_no_update ON audit_log;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION signet_audit_append_only();
DROP TRIGGER IF EXISTS audit_log_no_truncate ON audit_log;
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION signet_audit_append_only();
"#;

const SQLITE_UP: [&str; 2] = [
    "CREATE TRIGGER IF NOT EXISTS audit_log_no_update BEFORE UPDATE ON audit_log \
     BEGIN SELECT RAISE(ABORT, 'audit_log is append-only: UPDATE refused'); END",
    "CREATE TRIGGER IF NOT EXISTS audit_log_no_delete BEFORE DELETE ON audit_log \
     BEGIN SELECT RAISE(ABORT, 'audit_log is append-only: DELETE refused'); END",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table(AuditLog::Table).add_column(string(AuditLog::Alg).default("sha256")).to_owned(),
        )
        .await?;
        m.alter_table(Table::alter().table(AuditHead::Table).add_column(string_null(AuditHead::KeyId)).to_owned())
            .await?;
        let conn = m.get_connection();
        match m.get_database_backend() {
            DbBackend::Postgres => {
                conn.execute_unprepared(PG_UP).await?;
            }
            _ => {
                for stmt in SQLITE_UP {
                    conn.execute_unprepared(stmt).await?;
                }
            }
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let conn = m.get_connection();
        match m.get_database_backend() {
            DbBackend::Postgres => {
                conn.execute_unprepared(
                    "DROP TRIGGER IF EXISTS audit_log_no_update ON audit_log; \
                     DROP TRIGGER IF EXISTS audit_log_no_truncate ON audit_log; \
                     DROP FUNCTION IF EXISTS signet_audit_append_only();",
                )
                .await?;
            }
            _ => {
                conn.execute_unprepared("DROP TRIGGER IF EXISTS audit_log_no_update").await?;
                conn.execute_unprepared("DROP TRIGGER IF EXISTS audit_log_no_delete").await?;
            }
        }
        m.alter_table(Table::alter().table(AuditHead::Table).drop_column(AuditHead::KeyId).to_owned()).await?;
        m.alter_table(Table::alter().table(AuditLog::Table).drop_column(AuditLog::Alg).to_owned()).await
    }
}
