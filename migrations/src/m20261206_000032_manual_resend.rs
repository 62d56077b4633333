//! Horizons that include manual resends (issue 23 item 5). A horizon row
//! already records the automatic retry window (`horizon_secs`, `source`);
//! it now also records how far back the sender lets a person resend by hand
//! (`manual_resend_secs`, `manual_resend_source`). A dedup retention below
//! that window lets a manual resend apply twice, so setting one needs the
//! risk accepted on record.
//!
//! Each scheme gets a new version carrying the window (the history stays
//! append-only, as in migration 000012); the automatic horizon in force is
//! copied unchanged.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum RedeliveryHorizons {
    Table,
    ManualResendSecs,
    ManualResendSource,
}

const DAY: i64 = 86_400;

/// (scheme, manual resend window, source): what the senders publish.
const MANUAL: [(&str, i64, &str); 3] = [
    (
        "standard-webhooks",
        90 * DAY,
        "Svix (Standard Webhooks): customers can manually retry each message at any time, or recover all failed \
         messages from a given date (docs.svix.com/retries, \"Manual retries\"); payloads are kept 90 days \
         (docs.svix.com/retention)",
    ),
    (
        "stripe",
        30 * DAY,
        "Stripe: undelivered events can be listed and resent by hand for the last 30 days (\"Stripe only returns \
         events created in the last 30 days\", docs.stripe.com/webhooks/process-undelivered-events)",
    ),
    (
        "github",
        3 * DAY,
        "GitHub: a delivery can be redelivered by hand for 3 days (\"You can redeliver webhook deliveries that \
         occurred in the past 3 days\", docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/\
         redelivering-webhooks)",
    ),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one thing at a time.
        m.alter_table(
            Table::alter()
                .table(RedeliveryHorizons::Table)
                .add_column(big_integer(RedeliveryHorizons::ManualResendSecs).default(0))
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(RedeliveryHorizons::Table)
                .add_column(text_null(RedeliveryHorizons::ManualResendSource))
                .to_owned(),
        )
        .await?;
        let conn = m.get_connection();
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        for (scheme, secs, source) in MANUAL {
            let source = source.replace('\'', "''");
            conn.execute_unprepared(&format!(
                "INSERT INTO redelivery_horizons \
                     (scheme, version, horizon_secs, actor, reason, created_at, source, manual_resend_secs, \
                      manual_resend_source) \
                 SELECT h.scheme, h.version + 1, h.horizon_secs, 'system', \
                        'manual resend window recorded from the sender''s documentation (migration 000032)', \
                        {now_ms}, h.source, {secs}, '{source}' \
                 FROM redelivery_horizons h \
                 WHERE h.scheme = '{scheme}' \
                   AND h.version = (SELECT MAX(version) FROM redelivery_horizons WHERE scheme = '{scheme}')"
            ))
            .await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared(
                "DELETE FROM redelivery_horizons WHERE reason LIKE '%(migration 000032)' AND actor = 'system'",
            )
            .await?;
        for col in [RedeliveryHorizons::ManualResendSecs, RedeliveryHorizons::ManualResendSource] {
            m.alter_table(Table::alter().table(RedeliveryHorizons::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
