//! Sign-off integrity: a reviewer signs one bundle at most once (a unique
//! index the database enforces, not a check before the insert), and each
//! sign-off keeps the reviewer's acknowledgements of the bundle's findings
//! (`acknowledged`, a JSON array of `{finding, comment}`; `[]` for sign-offs
//! made before this migration).
//!
//! A database that already holds two sign-offs of one bundle by one reviewer
//! is not rewritten: the migration stops and names them, so an operator
//! decides which one stands (nothing stored is lost silently).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum EvidenceSignoffs {
    Table,
    Digest,
    Actor,
    ActorKind,
    Acknowledged,
}

const INDEX: &str = "ux_evidence_signoffs_reviewer";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let dup = m
            .get_connection()
            .query_one_raw(
                m.get_connection().get_database_backend().build(
                    Query::select()
                        .columns([EvidenceSignoffs::Digest, EvidenceSignoffs::ActorKind, EvidenceSignoffs::Actor])
                        .from(EvidenceSignoffs::Table)
                        .group_by_columns([
                            EvidenceSignoffs::Digest,
                            EvidenceSignoffs::ActorKind,
                            EvidenceSignoffs::Actor,
                        ])
                        .and_having(Expr::col(Asterisk).count().gt(1))
                        .limit(1),
                ),
            )
            .await?;
        if let Some(row) = dup {
            let digest: String = row.try_get("", "digest")?;
            let actor: String = row.try_get("", "actor")?;
            return Err(DbErr::Migration(format!(
                "evidence_signoffs holds more than one sign-off of bundle {digest} by {actor}; keep one per \
                 reviewer and bundle, then migrate again"
            )));
        }
        m.alter_table(
            Table::alter()
                .table(EvidenceSignoffs::Table)
                .add_column(text(EvidenceSignoffs::Acknowledged).default("[]"))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name(INDEX)
                .table(EvidenceSignoffs::Table)
                .col(EvidenceSignoffs::Digest)
                .col(EvidenceSignoffs::ActorKind)
                .col(EvidenceSignoffs::Actor)
                .unique()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(Index::drop().name(INDEX).table(EvidenceSignoffs::Table).to_owned()).await?;
        m.alter_table(
            Table::alter().table(EvidenceSignoffs::Table).drop_column(EvidenceSignoffs::Acknowledged).to_owned(),
        )
        .await
    }
}
