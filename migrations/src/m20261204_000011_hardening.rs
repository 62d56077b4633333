//! The security review's schema changes (issue 12):
//! - `endpoints.timestamp_floor`: after a tolerance is raised, signed
//!   timestamps that had already left the old window stay refused;
//! - `login_throttle.last_attempt_at` (was `window_started_at`): locks grow
//!   with each counted attempt instead of a fixed window;
//! - `login_devices`: browsers an account signed in from, which the
//!   account-wide lock does not cover;
//! - `kek_rewraps`: resumable jobs that reseal every sealed column under
//!   the newest KEK, one running at a time;
//! - `kek_retirements`: KEK versions taken out of the ring once nothing
//!   used them.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Endpoints {
    Table,
    TimestampFloor,
}

#[derive(DeriveIden)]
enum LoginThrottle {
    Table,
    WindowStartedAt,
    LastAttemptAt,
}

#[derive(DeriveIden)]
enum LoginDevices {
    Table,
    Digest,
    UserId,
    CreatedAt,
    LastUsedAt,
}

#[derive(DeriveIden)]
enum KekRewraps {
    Table,
    Id,
    TargetVersion,
    Status,
    Runner,
    Actor,
    Source,
    Cursor,
    Total,
    Scanned,
    Rewrapped,
    Error,
    CreatedAt,
    UpdatedAt,
    FinishedAt,
}

#[derive(DeriveIden)]
enum KekRetirements {
    Table,
    Version,
    CreatedAt,
    RetiredAt,
    RetiredBy,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter().table(Endpoints::Table).add_column(big_integer_null(Endpoints::TimestampFloor)).to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(LoginThrottle::Table)
                .rename_column(LoginThrottle::WindowStartedAt, LoginThrottle::LastAttemptAt)
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(LoginDevices::Table)
                .if_not_exists()
                .col(string(LoginDevices::Digest).primary_key())
                .col(string(LoginDevices::UserId))
                .col(big_integer(LoginDevices::CreatedAt))
                .col(big_integer(LoginDevices::LastUsedAt))
                .foreign_key(
                    ForeignKey::create()
                        .name("fk_login_devices_user")
                        .from(LoginDevices::Table, LoginDevices::UserId)
                        .to(Users::Table, Users::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_login_devices_user")
                .table(LoginDevices::Table)
                .col(LoginDevices::UserId)
                .if_not_exists()
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(KekRewraps::Table)
                .if_not_exists()
                .col(string(KekRewraps::Id).primary_key())
                .col(integer(KekRewraps::TargetVersion))
                .col(string(KekRewraps::Status))
                .col(string(KekRewraps::Runner))
                .col(string(KekRewraps::Actor))
                .col(string(KekRewraps::Source))
                .col(text_null(KekRewraps::Cursor))
                .col(big_integer(KekRewraps::Total))
                .col(big_integer(KekRewraps::Scanned))
                .col(big_integer(KekRewraps::Rewrapped))
                .col(text_null(KekRewraps::Error))
                .col(big_integer(KekRewraps::CreatedAt))
                .col(big_integer(KekRewraps::UpdatedAt))
                .col(big_integer_null(KekRewraps::FinishedAt))
                .to_owned(),
        )
        .await?;
        // One rewrap at a time, decided by the database (both engines have
        // partial unique indexes).
        m.get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX IF NOT EXISTS ux_kek_rewraps_one_running ON kek_rewraps (status) \
                 WHERE status = 'running'",
            )
            .await?;
        m.create_table(
            Table::create()
                .table(KekRetirements::Table)
                .if_not_exists()
                .col(integer(KekRetirements::Version).primary_key())
                .col(big_integer(KekRetirements::CreatedAt))
                .col(big_integer(KekRetirements::RetiredAt))
                .col(string(KekRetirements::RetiredBy))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(KekRetirements::Table).if_exists().to_owned()).await?;
        m.drop_table(Table::drop().table(KekRewraps::Table).if_exists().to_owned()).await?;
        m.drop_table(Table::drop().table(LoginDevices::Table).if_exists().to_owned()).await?;
        m.alter_table(
            Table::alter()
                .table(LoginThrottle::Table)
                .rename_column(LoginThrottle::LastAttemptAt, LoginThrottle::WindowStartedAt)
                .to_owned(),
        )
        .await?;
        m.alter_table(Table::alter().table(Endpoints::Table).drop_column(Endpoints::TimestampFloor).to_owned()).await
    }
}
