//! `signet event show`: one event's whole story, the object
//! `GET /api/v1/tenants/{tenant}/endpoints/{endpoint}/events/{event_id}` answers.

use domain::{DomainError, ids::named};
use domain::{auth::Principal, events::story, vault::Vault};
use sea_orm::DatabaseConnection;
use views::ids::EventId;

use super::{
    EventCmd,
    output::{CliError, emit},
};

pub(super) async fn event(
    json: bool,
    db: &DatabaseConnection,
    vault: Option<Vault>,
    p: &Principal,
    cmd: EventCmd,
) -> Result<(), CliError> {
    let vault = vault.ok_or_else(|| CliError::new("vault", "the vault is not open"))?;
    match cmd {
        EventCmd::Show { tenant, endpoint, event_id } => {
            let event_id = EventId::parse(event_id).map_err(DomainError::from)?;
            let s = story::story(db, &vault, p, &named(&tenant)?, &named(&endpoint)?, &event_id).await?;
            emit(json, &s, || human(&s));
        }
    }
    Ok(())
}

fn human(s: &views::events::EventStory) -> String {
    let mut lines = Vec::new();
    match &s.claim {
        Some(c) => lines.push(format!(
            "claim: {} {} key {} at {} (body sha256 {}{})",
            c.event_type.as_deref().unwrap_or("-"),
            c.outcome,
            c.key_id,
            c.received_at,
            c.body_sha256,
            if c.body_stored { "" } else { ", body purged" }
        )),
        None => lines.push("claim: none".into()),
    }
    lines.push(format!("deliveries: {}", s.deliveries.len()));
    for d in &s.deliveries {
        let key = d.key_id.as_ref().map_or("-", views::ids::KeyId::as_str);
        lines.push(format!("  {}  {} {}  key {key}  {}", d.answered_at, d.status, d.answer, d.scheme));
    }
    lines.push(format!("replay records: {}", s.replay.len()));
    for r in &s.replay {
        // Kept past the window it guards on PostgreSQL: until its day goes.
        let kept = if r.kept_until > r.expires_at { format!(", kept until {}", r.kept_until) } else { String::new() };
        lines.push(format!("  {} guards until {}{kept}", r.message_sha256, r.expires_at));
    }
    match &s.quarantine {
        Some(q) => {
            lines.push(format!(
                "quarantine: {} {} ({}); reveal: {}",
                q.entry.id, q.entry.status, q.entry.reason, q.reveal
            ));
            for a in &q.triage {
                lines.push(format!("  {}  {}  {}", a.at, a.actor, a.action));
            }
        }
        None => lines.push("quarantine: none".into()),
    }
    match &s.reminder {
        Some(r) => lines.push(format!(
            "reminder: {} {} ({}); now {}",
            r.reminder_id,
            r.transition,
            r.outcome,
            r.current.as_ref().map_or("gone", |c| c.status.as_str())
        )),
        None => lines.push("reminder: none".into()),
    }
    lines.push(format!("outbox intents: {}", s.outbox.len()));
    for o in &s.outbox {
        let error = o.last_error.as_deref().unwrap_or("-");
        lines.push(format!("  {} {} {} after {} attempt(s); last error: {error}", o.id, o.kind, o.status, o.attempts));
    }
    lines.push(format!("audit entries: {}", s.audit.len()));
    for a in &s.audit {
        lines.push(format!("  #{} {}  {}  {} {}", a.seq, a.at, a.actor, a.action, a.target_id));
    }
    lines.join("\n")
}
