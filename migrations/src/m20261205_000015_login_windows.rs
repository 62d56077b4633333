//! Bounded sign-in failure records (issue 24, item 3): each throttle row
//! also holds its subject's open audit window (when it opened, its failures,
//! the name tried, the addresses and reasons seen), so one audit entry per
//! subject and window records them, with a count, when the window closes.
//! Indexes for the sweep that closes ended windows and deletes stale rows.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum LoginThrottle {
    Table,
    LastAttemptAt,
    WindowAt,
    WindowLastAt,
    WindowFailures,
    WindowTarget,
    WindowAddresses,
    WindowReasons,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one column at a time.
        for col in [
            big_integer_null(LoginThrottle::WindowAt),
            big_integer_null(LoginThrottle::WindowLastAt),
            integer(LoginThrottle::WindowFailures).default(0).to_owned(),
            text_null(LoginThrottle::WindowTarget),
            text_null(LoginThrottle::WindowAddresses),
            text_null(LoginThrottle::WindowReasons),
        ] {
            m.alter_table(Table::alter().table(LoginThrottle::Table).add_column(col).to_owned()).await?;
        }
        for (name, col) in [
            ("ix_login_throttle_window_at", LoginThrottle::WindowAt),
            ("ix_login_throttle_last_attempt_at", LoginThrottle::LastAttemptAt),
        ] {
            m.create_index(Index::create().name(name).table(LoginThrottle::Table).col(col).if_not_exists().to_owned())
                .await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for name in ["ix_login_throttle_window_at", "ix_login_throttle_last_attempt_at"] {
            m.drop_index(Index::drop().name(name).table(LoginThrottle::Table).to_owned()).await?;
        }
        for col in [
            LoginThrottle::WindowAt,
            LoginThrottle::WindowLastAt,
            LoginThrottle::WindowFailures,
            LoginThrottle::WindowTarget,
            LoginThrottle::WindowAddresses,
            LoginThrottle::WindowReasons,
        ] {
            m.alter_table(Table::alter().table(LoginThrottle::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
