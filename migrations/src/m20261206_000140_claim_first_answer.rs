//! `inbox_claims.first_answer` and `message_digest`: the claim records the
//! answer its event's first accepted delivery got (`applied`,
//! `stale_transition` or `quarantined`; a later quarantine release rewrites
//! `outcome`, never this) and that delivery's signed-message digest, which
//! names its replay record. The delivery log then keeps only the other
//! answers (duplicates, refusals, 503s): one row fewer per event on the hot
//! path (issue 25's 5% budget). `NULL` for claims made before this migration
//! (their first answer is in the delivery log) and for the compound-key
//! claims a quarantine release takes (no delivery was answered under them).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum InboxClaims {
    Table,
    FirstAnswer,
    MessageDigest,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite's ALTER TABLE adds one at a time.
        for col in [InboxClaims::FirstAnswer, InboxClaims::MessageDigest] {
            m.alter_table(Table::alter().table(InboxClaims::Table).add_column(string_null(col)).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for col in [InboxClaims::MessageDigest, InboxClaims::FirstAnswer] {
            m.alter_table(Table::alter().table(InboxClaims::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
