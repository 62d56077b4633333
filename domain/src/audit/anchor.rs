//! Anchors: signed checkpoints of the chain's head kept outside the database.
//!
//! Threat model: someone with write access to the database (no master key
//! needed) drops the append-only triggers, deletes the newest entries and
//! points the head at the new end. The chain that remains is intact, so
//! nothing inside the database can show the loss; a checkpoint written
//! elsewhere before the deletion can. The server appends one after every
//! sensitive action and at least every few minutes (`server::anchor`);
//! [`check`] holds the live chain against every checkpoint of such a file,
//! and names the entries that are gone.

use std::collections::BTreeMap;

use sea_orm::{ColumnTrait, Condition, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect};

use super::checkpoint;
use crate::{crypto::service::verify_signature, entity::audit_entry, error::DomainResult, service_keys, vault::Vault};

use views::evidence::SignedCheckpoint;

/// Actions whose entries are anchored at once (by prefix): key lifecycle
/// and scope, sign-offs, retry policy, the KEK, users and tokens.
pub const SENSITIVE: [&str; 7] = ["key.", "evidence.signoff", "retry_policy.", "kek.", "user.", "token.", "setup."];

/// The chain's head now, signed with the evidence key.
pub async fn signed(db: &DatabaseConnection, vault: &Vault) -> DomainResult<SignedCheckpoint> {
    let signer = service_keys::evidence_signer(db, vault).await?;
    let cp = checkpoint(db).await?;
    Ok(SignedCheckpoint {
        signature: signer.sign_base64(&cp.signed_bytes()),
        public_key: signer.public_key_base64(),
        checkpoint: cp,
    })
}

/// Whether an entry after `seq` records a [`SENSITIVE`] action.
pub async fn sensitive_after(db: &DatabaseConnection, seq: i64) -> DomainResult<bool> {
    let any =
        SENSITIVE.iter().fold(Condition::any(), |c, prefix| c.add(audit_entry::Column::Action.starts_with(*prefix)));
    let hit = audit_entry::Entity::find()
        .select_only()
        .column(audit_entry::Column::Seq)
        .filter(audit_entry::Column::Seq.gt(seq))
        .filter(any)
        .limit(1)
        .into_tuple::<i64>()
        .one(db)
        .await?;
    Ok(hit.is_some())
}

/// One checkpoint and where it was read (`line 12`, `the bundle's
/// checkpoint`), for the problems that name it.
#[derive(Debug, Clone)]
pub struct Anchored {
    pub source: String,
    pub checkpoint: SignedCheckpoint,
}

/// Parses a checkpoint file (one JSON document a line; blank lines are
/// skipped). The error names the first line that is not a checkpoint.
pub fn parse(text: &str) -> Result<Vec<Anchored>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let checkpoint: SignedCheckpoint =
            serde_json::from_str(line).map_err(|e| format!("line {}: not a signed checkpoint: {e}", i + 1))?;
        out.push(Anchored { source: format!("line {}", i + 1), checkpoint });
    }
    Ok(out)
}

/// What the live chain lacks against `anchors`, one sentence a problem:
/// a checkpoint whose signature does not verify under `public_key`, entries
/// a checkpoint recorded that are gone (named as a range), and entries that
/// carry another link than the checkpoint recorded. Empty: the chain still
/// holds every checkpoint.
pub async fn check(db: &DatabaseConnection, anchors: &[Anchored], public_key: &str) -> DomainResult<Vec<String>> {
    let mut problems = Vec::new();
    // Checkpoints of one head repeat (one every few minutes while nothing
    // happens): each sequence number is looked up once.
    let mut by_seq: BTreeMap<i64, Vec<&Anchored>> = BTreeMap::new();
    for a in anchors {
        let cp = &a.checkpoint;
        if let Err(e) = verify_signature(public_key, &cp.checkpoint.signed_bytes(), &cp.signature) {
            problems.push(format!("{}: the checkpoint's signature does not verify: {e}", a.source));
        } else if cp.checkpoint.seq > 0 {
            by_seq.entry(cp.checkpoint.seq).or_default().push(a);
        }
    }
    // Where the chain really ends, whatever the head row says.
    let chain_end: i64 = audit_entry::Entity::find()
        .select_only()
        .column_as(audit_entry::Column::Seq.max(), "end")
        .into_tuple::<Option<i64>>()
        .one(db)
        .await?
        .flatten()
        .unwrap_or(0);
    if let Some((&last, at)) = by_seq.iter().next_back()
        && last > chain_end
    {
        let a = at[0];
        problems.push(format!(
            "entries {}–{last} are missing: the checkpoint of {} ({}) recorded entry {last}, and the chain now \
             ends at entry {chain_end}",
            chain_end + 1,
            a.checkpoint.checkpoint.at,
            a.source
        ));
    }
    let seqs: Vec<i64> = by_seq.keys().copied().filter(|s| *s <= chain_end).collect();
    let mut present: BTreeMap<i64, String> = BTreeMap::new();
    for chunk in seqs.chunks(500) {
        let rows: Vec<(i64, String)> = audit_entry::Entity::find()
            .select_only()
            .columns([audit_entry::Column::Seq, audit_entry::Column::Hash])
            .filter(audit_entry::Column::Seq.is_in(chunk.iter().copied()))
            .into_tuple()
            .all(db)
            .await?;
        present.extend(rows);
    }
    for seq in seqs {
        let a = by_seq[&seq][0];
        let at = &a.checkpoint.checkpoint.at;
        match present.get(&seq) {
            Some(hash) if *hash == a.checkpoint.checkpoint.head => {}
            Some(_) => problems.push(format!(
                "entry {seq} carries another link than the checkpoint of {at} ({}) recorded: the chain was \
                 rewritten",
                a.source
            )),
            None => {
                problems.push(format!("entry {seq}, recorded by the checkpoint of {at} ({}), is missing", a.source))
            }
        }
    }
    Ok(problems)
}
