//! Sign-off evidence (docs/contract.md §5): the drill tenant's marker, service keys
//! sealed in the vault (the evidence-signing key, the audit MAC key), drill
//! runs, the exported bundles and the reviewers' sign-offs on them.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Tenants {
    Table,
    Synthetic,
}

#[derive(DeriveIden)]
enum ServiceKeys {
    Table,
    Purpose,
    KeyId,
    Ciphertext,
    KekVersion,
    PublicKey,
    Binding,
    CreatedAt,
}

#[derive(DeriveIden)]
enum DrillRuns {
    Table,
    Id,
    Actor,
    ActorKind,
    Status,
    Passed,
    Engine,
    Version,
    SchemaVersion,
    Results,
    Error,
    StartedAt,
    UpdatedAt,
    FinishedAt,
}

#[derive(DeriveIden)]
enum EvidenceExports {
    Table,
    Digest,
    TenantId,
    Actor,
    ActorKind,
    Via,
    CreatedAt,
    Manifest,
    Signature,
    EvidenceJson,
    EvidenceHtml,
}

#[derive(DeriveIden)]
enum EvidenceSignoffs {
    Table,
    Id,
    Digest,
    TenantId,
    Decision,
    Comment,
    Actor,
    ActorKind,
    At,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // The drill tenant is ordinary rows with this flag: hidden from
        // tenant lists, metrics, rollups, gauges and the outbox worker.
        m.alter_table(
            Table::alter().table(Tenants::Table).add_column(boolean(Tenants::Synthetic).default(false)).to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(ServiceKeys::Table)
                .if_not_exists()
                .col(string(ServiceKeys::Purpose).primary_key())
                .col(string_uniq(ServiceKeys::KeyId))
                .col(blob(ServiceKeys::Ciphertext))
                .col(integer(ServiceKeys::KekVersion))
                .col(text_null(ServiceKeys::PublicKey))
                .col(string(ServiceKeys::Binding))
                .col(big_integer(ServiceKeys::CreatedAt))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(DrillRuns::Table)
                .if_not_exists()
                .col(string(DrillRuns::Id).primary_key())
                .col(string(DrillRuns::Actor))
                .col(string(DrillRuns::ActorKind))
                .col(string(DrillRuns::Status))
                .col(boolean_null(DrillRuns::Passed))
                .col(string(DrillRuns::Engine))
                .col(string(DrillRuns::Version))
                .col(string(DrillRuns::SchemaVersion))
                .col(text(DrillRuns::Results))
                .col(text_null(DrillRuns::Error))
                .col(big_integer(DrillRuns::StartedAt))
                .col(big_integer(DrillRuns::UpdatedAt))
                .col(big_integer_null(DrillRuns::FinishedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_drill_runs_started")
                .table(DrillRuns::Table)
                .col(DrillRuns::StartedAt)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        // At most one run in progress: drills share the drill tenant and its
        // fault points. Both engines support partial unique indexes.
        m.get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX IF NOT EXISTS ux_drill_runs_one_running ON drill_runs (status) \
                 WHERE status = 'running'",
            )
            .await?;
        m.create_table(
            Table::create()
                .table(EvidenceExports::Table)
                .if_not_exists()
                .col(string(EvidenceExports::Digest).primary_key())
                .col(string_null(EvidenceExports::TenantId))
                .col(string(EvidenceExports::Actor))
                .col(string(EvidenceExports::ActorKind))
                .col(string(EvidenceExports::Via))
                .col(big_integer(EvidenceExports::CreatedAt))
                .col(text(EvidenceExports::Manifest))
                .col(text(EvidenceExports::Signature))
                .col(text(EvidenceExports::EvidenceJson))
                .col(text(EvidenceExports::EvidenceHtml))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_evidence_exports_created")
                .table(EvidenceExports::Table)
                .col(EvidenceExports::CreatedAt)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(EvidenceSignoffs::Table)
                .if_not_exists()
                .col(string(EvidenceSignoffs::Id).primary_key())
                .col(string(EvidenceSignoffs::Digest))
                .col(string_null(EvidenceSignoffs::TenantId))
                .col(string(EvidenceSignoffs::Decision))
                .col(text(EvidenceSignoffs::Comment))
                .col(string(EvidenceSignoffs::Actor))
                .col(string(EvidenceSignoffs::ActorKind))
                .col(big_integer(EvidenceSignoffs::At))
                .foreign_key(
                    ForeignKey::create()
                        .from(EvidenceSignoffs::Table, EvidenceSignoffs::Digest)
                        .to(EvidenceExports::Table, EvidenceExports::Digest),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_evidence_signoffs_at")
                .table(EvidenceSignoffs::Table)
                .col(EvidenceSignoffs::At)
                .if_not_exists()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(EvidenceSignoffs::Table).if_exists().to_owned()).await?;
        m.drop_table(Table::drop().table(EvidenceExports::Table).if_exists().to_owned()).await?;
        m.drop_table(Table::drop().table(DrillRuns::Table).if_exists().to_owned()).await?;
        m.drop_table(Table::drop().table(ServiceKeys::Table).if_exists().to_owned()).await?;
        m.alter_table(Table::alter().table(Tenants::Table).drop_column(Tenants::Synthetic).to_owned()).await
    }
}
