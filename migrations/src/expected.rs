//! The database constraints Signet's guarantees rest on, declared once, next
//! to the migrations that create them. The evidence export reads the live
//! catalog and reports each of these as present or missing, so a reviewer
//! sees what the database enforces, not what the code assumes.

/// What kind of rule the database must enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedKind {
    /// A primary key or unique index/constraint over exactly these columns
    /// (in any order).
    Unique { columns: &'static [&'static str] },
    /// A foreign key from these columns to those of `ref_table`, pairwise.
    ForeignKey { columns: &'static [&'static str], ref_table: &'static str, ref_columns: &'static [&'static str] },
    /// Triggers that refuse UPDATE and DELETE on the table.
    AppendOnly,
}

/// One expected constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    /// Stable name used in the evidence and its findings.
    pub id: &'static str,
    pub table: &'static str,
    pub kind: ExpectedKind,
    /// What it guarantees, for the reviewer.
    pub guarantees: &'static str,
}

/// Every constraint the evidence checks.
pub const EXPECTED: &[Expected] = &[
    Expected {
        id: "claim_unique",
        table: "inbox_claims",
        kind: ExpectedKind::Unique { columns: &["tenant_id", "endpoint_id", "event_id"] },
        guarantees: "one claim per (tenant, endpoint, event id): a duplicate delivery can never apply a second effect",
    },
    Expected {
        id: "replay_unique",
        table: "replay_records",
        kind: ExpectedKind::Unique { columns: &["tenant_id", "endpoint_id", "message_digest", "signed_at"] },
        guarantees: "a signed message is accepted once per endpoint (of its one tenant): an exact replay answers 409 \
                     (signed_at, the day partition, is the timestamp the digest covers, so one message has one)",
    },
    Expected {
        id: "outbox_once",
        table: "outbox_intents",
        kind: ExpectedKind::Unique { columns: &["tenant_id", "idempotency_key"] },
        guarantees: "at most one outbox intent per (tenant, idempotency key): one OTP per request id, ever",
    },
    Expected {
        id: "quarantine_claim_unique",
        table: "quarantine",
        kind: ExpectedKind::Unique { columns: &["tenant_id", "endpoint_id", "event_id"] },
        guarantees: "one quarantine entry per claimed event",
    },
    Expected {
        id: "reminder_unique",
        table: "reminders",
        kind: ExpectedKind::Unique { columns: &["tenant_id", "reminder_id"] },
        guarantees: "one reminder per (tenant, reminder id)",
    },
    Expected {
        id: "key_endpoint_same_tenant",
        table: "signing_keys",
        kind: ExpectedKind::ForeignKey {
            columns: &["endpoint_id", "tenant_id"],
            ref_table: "endpoints",
            ref_columns: &["id", "tenant_id"],
        },
        guarantees: "a key belongs to an endpoint of its own tenant: the key → endpoint → tenant binding",
    },
    Expected {
        id: "endpoint_tenant",
        table: "endpoints",
        kind: ExpectedKind::ForeignKey { columns: &["tenant_id"], ref_table: "tenants", ref_columns: &["id"] },
        guarantees: "an endpoint belongs to an existing tenant",
    },
    Expected {
        id: "endpoint_slug_unique",
        table: "endpoints",
        kind: ExpectedKind::Unique { columns: &["tenant_id", "slug"] },
        guarantees: "a path /hooks/{tenant}/{endpoint} names exactly one endpoint",
    },
    Expected {
        id: "tenant_slug_unique",
        table: "tenants",
        kind: ExpectedKind::Unique { columns: &["slug"] },
        guarantees: "a path's tenant slug names exactly one tenant",
    },
    Expected {
        id: "audit_seq_unique",
        table: "audit_log",
        kind: ExpectedKind::Unique { columns: &["seq"] },
        guarantees: "the audit chain cannot fork: one entry per sequence number",
    },
    Expected {
        id: "audit_append_only",
        table: "audit_log",
        kind: ExpectedKind::AppendOnly,
        guarantees: "audit entries cannot be updated or deleted through ordinary SQL",
    },
    Expected {
        id: "signoff_once_per_reviewer",
        table: "evidence_signoffs",
        kind: ExpectedKind::Unique { columns: &["digest", "actor_kind", "actor"] },
        guarantees: "a reviewer signs a bundle at most once: a second sign-off by the same person is refused",
    },
];
