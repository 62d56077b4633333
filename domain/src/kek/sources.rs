//! The sealed columns a rewrap walks, and how many rows each version seals.

use std::collections::BTreeMap;

use sea_orm::{
    ConnectionTrait, DbErr, QueryResult,
    sea_query::{Alias, Expr, ExprTrait, Query},
};

use crate::{crypto::Aad, error::DomainResult};

/// One sealed column: where it lives and how its AAD is built.
pub struct Source {
    /// Stable name (shown in progress and counts).
    pub name: &'static str,
    pub(super) table: &'static str,
    pub(super) pk: &'static [&'static str],
    /// The key columns that hold integers (the job's cursor keeps every
    /// key value as text).
    pub(super) integers: &'static [&'static str],
    /// Columns besides the key that the AAD needs.
    pub(super) extra: &'static [&'static str],
    pub(super) column: &'static str,
    pub(super) aad: fn(&QueryResult) -> Result<Aad, DbErr>,
    /// Only rows matching this hold a sealed value (a `v1a` public key a
    /// provider uploaded is stored in clear with version 0, nothing sealed).
    sealed_only: Option<fn() -> Expr>,
}

impl Source {
    /// The `sealed_only` predicate, if any.
    pub(super) fn sealed_rows(&self) -> Option<Expr> {
        self.sealed_only.map(|p| p())
    }
}

pub(super) fn text(row: &QueryResult, col: &str) -> Result<String, DbErr> {
    row.try_get::<String>("", col)
}

/// Every sealed column, in the order a rewrap walks them.
pub const SOURCES: [Source; 4] = [
    Source {
        name: "signing_keys",
        table: "signing_keys",
        pk: &["id"],
        integers: &[],
        extra: &["tenant_id", "endpoint_id"],
        column: "secret_ciphertext",
        aad: |r| Ok(Aad::signing_key(&text(r, "tenant_id")?, &text(r, "endpoint_id")?, &text(r, "id")?)),
        // HMAC secrets and the private keys of pairs Signet generated.
        sealed_only: Some(|| Expr::col(Alias::new("kek_version")).ne(0)),
    },
    Source {
        name: "service_keys",
        table: "service_keys",
        pk: &["purpose"],
        integers: &[],
        extra: &["key_id", "binding"],
        column: "ciphertext",
        aad: |r| Ok(Aad::service_key(&text(r, "purpose")?, &text(r, "key_id")?, &text(r, "binding")?)),
        sealed_only: None,
    },
    Source {
        name: "outbox_payloads",
        table: "outbox_intents",
        // Walked by id (ix_outbox_id), not by the (tenant_id, id) key: a
        // rewrap started before that key holds a cursor of the id alone.
        pk: &["id"],
        integers: &[],
        extra: &["tenant_id"],
        column: "payload_ciphertext",
        aad: |r| Ok(Aad::outbox_payload(&text(r, "tenant_id")?, &text(r, "id")?)),
        sealed_only: None,
    },
    Source {
        name: "event_bodies",
        table: "event_bodies",
        // Walked in key order (the table's only index).
        pk: &["endpoint_id", "received_at", "tenant_id", "event_id", "filed_at"],
        integers: &["received_at", "filed_at"],
        extra: &[],
        column: "body_ciphertext",
        aad: |r| Ok(Aad::event_body(&text(r, "tenant_id")?, &text(r, "endpoint_id")?, &text(r, "event_id")?)),
        sealed_only: None,
    },
];

fn col(name: &str) -> Expr {
    Expr::col(Alias::new(name))
}

pub(super) fn key_tuple(s: &Source) -> Expr {
    Expr::tuple(s.pk.iter().map(|c| col(c)))
}

/// A row's key values as the job's cursor keeps them: text.
pub(super) fn key_values(s: &Source, row: &QueryResult) -> Result<Vec<String>, DbErr> {
    s.pk.iter()
        .map(|c| if s.integers.contains(c) { row.try_get::<i64>("", c).map(|v| v.to_string()) } else { text(row, c) })
        .collect()
}

/// Key values (as [`key_values`] gives them) as a tuple of the columns'
/// own types.
pub(super) fn value_tuple(s: &Source, values: &[String]) -> Result<Expr, DbErr> {
    let vals =
        s.pk.iter()
            .zip(values)
            .map(|(c, v)| {
                if s.integers.contains(c) {
                    v.parse::<i64>().map(Expr::val).map_err(|e| DbErr::Custom(format!("bad rewrap cursor: {e}")))
                } else {
                    Ok(Expr::val(v.clone()))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
    Ok(Expr::tuple(vals))
}

/// Rows per (source, version). Reads every sealed table once (on ten million
/// stored events about a second on PostgreSQL; see
/// docs/benchmarks.md#kek-rewrap).
pub async fn counts<C: ConnectionTrait>(conn: &C) -> DomainResult<BTreeMap<(String, u32), u64>> {
    let mut out = BTreeMap::new();
    for s in &SOURCES {
        let mut stmt = Query::select()
            .expr_as(col("kek_version"), Alias::new("v"))
            .expr_as(Expr::col(Alias::new("kek_version")).count(), Alias::new("n"))
            .from(Alias::new(s.table))
            .and_where(Expr::col(Alias::new("kek_version")).is_not_null())
            .group_by_col(Alias::new("kek_version"))
            .to_owned();
        if let Some(only) = s.sealed_rows() {
            stmt.and_where(only);
        }
        for row in conn.query_all(&stmt).await? {
            let v: i32 = row.try_get("", "v")?;
            let n: i64 = row.try_get("", "n")?;
            out.insert((s.name.to_owned(), v as u32), n as u64);
        }
    }
    Ok(out)
}
