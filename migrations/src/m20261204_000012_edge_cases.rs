//! The design articles' edge cases (docs/architecture.md#design-rationale;
//! issue 13):
//! - `redelivery_horizons.source`: where each horizon comes from, and new
//!   versions set from the senders' published retry schedules with margin
//!   (never lowering one an administrator raised), extending the GitHub
//!   replay records held by the raise;
//! - `endpoints.event_id_fields` and `event_key_versions`: an explicit,
//!   versioned compound event key for senders without stable event ids;
//! - `reminders.state_at`: when the event that set the reminder's status
//!   happened, for the transition rules;
//! - per-key verification failures: `signing_keys.failure_count`,
//!   `last_failure_at`, `last_failure_reason`, and `key_failure_rollups`.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum RedeliveryHorizons {
    Table,
    Source,
}

#[derive(DeriveIden)]
enum Endpoints {
    Table,
    EventIdFields,
}

#[derive(DeriveIden)]
enum EventKeyVersions {
    Table,
    EndpointId,
    Version,
    Fields,
    Actor,
    Reason,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Reminders {
    Table,
    StateAt,
}

#[derive(DeriveIden)]
enum SigningKeys {
    Table,
    FailureCount,
    LastFailureAt,
    LastFailureReason,
}

#[derive(DeriveIden)]
enum KeyFailureRollups {
    Table,
    Hour,
    KeyId,
    TenantId,
    EndpointId,
    Reason,
    Count,
}

const DAY: i64 = 86_400;

/// (scheme, horizon, source): the published schedules, with margin.
const HORIZONS: [(&str, i64, &str); 3] = [
    (
        "standard-webhooks",
        2 * DAY,
        "Svix (Standard Webhooks) retries immediately, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h: \
         about 27.6 h from the first attempt; 2 d leaves margin",
    ),
    ("stripe", 4 * DAY, "Stripe retries live-mode events for up to 3 days with exponential backoff; 4 d leaves margin"),
    (
        "github",
        4 * DAY,
        "GitHub never retries on its own; a failed delivery can be redelivered by hand for 3 days; 4 d leaves margin",
    ),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(RedeliveryHorizons::Table)
                .add_column(text_null(RedeliveryHorizons::Source))
                .to_owned(),
        )
        .await?;
        let conn = m.get_connection();
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        for (scheme, secs, source) in HORIZONS {
            let before = conn
                .query_one_raw(sea_orm_migration::sea_orm::Statement::from_string(
                    conn.get_database_backend(),
                    format!(
                        "SELECT horizon_secs FROM redelivery_horizons WHERE scheme = '{scheme}' \
                         ORDER BY version DESC LIMIT 1"
                    ),
                ))
                .await?
                .map(|row| row.try_get::<i64>("", "horizon_secs"))
                .transpose()?;
            // GitHub's replay records (one per signed body) are kept for the
            // dedup retention, which the horizon floors: a raise extends the
            // ones held, so no body becomes acceptable again in between.
            if let Some(old) = before.filter(|old| scheme == "github" && *old < secs) {
                conn.execute_unprepared(&format!(
                    "UPDATE replay_records SET expires_at = expires_at + {} \
                     WHERE endpoint_id IN (SELECT id FROM endpoints WHERE scheme = 'github')",
                    (secs - old) * 1000
                ))
                .await?;
            }
            // A new version only where the horizon in force is shorter: one an
            // administrator raised further stays as it is.
            conn.execute_unprepared(&format!(
                "INSERT INTO redelivery_horizons (scheme, version, horizon_secs, actor, reason, created_at, source) \
                 SELECT h.scheme, h.version + 1, {secs}, 'system', \
                        'set from the published retry schedule, with margin (migration 000012)', {now_ms}, '{source}' \
                 FROM redelivery_horizons h \
                 WHERE h.scheme = '{scheme}' AND h.horizon_secs < {secs} \
                   AND h.version = (SELECT MAX(version) FROM redelivery_horizons WHERE scheme = '{scheme}')"
            ))
            .await?;
        }
        m.alter_table(
            Table::alter().table(Endpoints::Table).add_column(text_null(Endpoints::EventIdFields)).to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(EventKeyVersions::Table)
                .if_not_exists()
                .col(string(EventKeyVersions::EndpointId))
                .col(integer(EventKeyVersions::Version))
                .col(text_null(EventKeyVersions::Fields))
                .col(string(EventKeyVersions::Actor))
                .col(text(EventKeyVersions::Reason))
                .col(big_integer(EventKeyVersions::CreatedAt))
                .primary_key(Index::create().col(EventKeyVersions::EndpointId).col(EventKeyVersions::Version))
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter().table(Reminders::Table).add_column(big_integer_null(Reminders::StateAt)).to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(SigningKeys::Table)
                .add_column(big_integer(SigningKeys::FailureCount).default(0))
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(SigningKeys::Table)
                .add_column(big_integer_null(SigningKeys::LastFailureAt))
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter().table(SigningKeys::Table).add_column(string_null(SigningKeys::LastFailureReason)).to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(KeyFailureRollups::Table)
                .if_not_exists()
                .col(big_integer(KeyFailureRollups::Hour))
                .col(string(KeyFailureRollups::KeyId))
                .col(string(KeyFailureRollups::TenantId))
                .col(string(KeyFailureRollups::EndpointId))
                .col(string(KeyFailureRollups::Reason))
                .col(big_integer(KeyFailureRollups::Count))
                .primary_key(
                    Index::create()
                        .col(KeyFailureRollups::Hour)
                        .col(KeyFailureRollups::KeyId)
                        .col(KeyFailureRollups::Reason),
                )
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(KeyFailureRollups::Table).if_exists().to_owned()).await?;
        for col in [SigningKeys::LastFailureReason, SigningKeys::LastFailureAt, SigningKeys::FailureCount] {
            m.alter_table(Table::alter().table(SigningKeys::Table).drop_column(col).to_owned()).await?;
        }
        m.alter_table(Table::alter().table(Reminders::Table).drop_column(Reminders::StateAt).to_owned()).await?;
        m.drop_table(Table::drop().table(EventKeyVersions::Table).if_exists().to_owned()).await?;
        m.alter_table(Table::alter().table(Endpoints::Table).drop_column(Endpoints::EventIdFields).to_owned()).await?;
        m.get_connection()
            .execute_unprepared("DELETE FROM redelivery_horizons WHERE reason LIKE '%(migration 000012)'")
            .await?;
        m.alter_table(
            Table::alter().table(RedeliveryHorizons::Table).drop_column(RedeliveryHorizons::Source).to_owned(),
        )
        .await
    }
}
