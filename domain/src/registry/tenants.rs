//! Tenants are clinics. Slugs are the public names in URLs and the CLI.

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{
    audit::{self, Change},
    auth::{Principal, Scope},
    clock, db,
    entity::tenant,
    error::{DomainError, DomainResult},
    ids,
};
use views::ids::TenantSlug;
use views::{registry::TenantView, retry_policy::RetryPolicy, roles::Permission};

/// A stored slug outside the slug rule is a corrupt row (an internal error).
impl TryFrom<tenant::Model> for TenantView {
    type Error = DomainError;
    fn try_from(t: tenant::Model) -> DomainResult<Self> {
        Ok(TenantView {
            slug: ids::stored(&t.slug)?,
            id: t.id,
            name: t.name,
            notify_url: t.notify_url,
            created_at: clock::rfc3339(t.created_at),
            retry_policy: t.retry_policy,
        })
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewTenant {
    #[cfg_attr(feature = "openapi", schema(schema_with = views::ids::slug_schema))]
    pub slug: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = name_schema))]
    pub name: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = notify_url_schema))]
    pub notify_url: Option<String>,
}

/// `None` leaves a field unchanged; `notify_url: Some("")` clears it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantPatch {
    #[cfg_attr(feature = "openapi", schema(schema_with = name_schema))]
    pub name: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = notify_url_schema))]
    pub notify_url: Option<String>,
}

/// The longest tenant name, in characters as sent.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest notify URL, in characters as sent.
pub const MAX_URL_CHARS: usize = 2048;

fn validate_name(name: &str) -> DomainResult<String> {
    if crate::text::is_blank(name) || !crate::text::fits(name, MAX_NAME_CHARS) {
        return Err(DomainError::invalid("invalid_name", format!("name must be 1–{MAX_NAME_CHARS} characters")));
    }
    Ok(name.trim().to_owned())
}

#[cfg(feature = "openapi")]
fn name_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(crate::text::schema(MAX_NAME_CHARS))
}

/// [`validate_notify_url`] as an ECMA-262 pattern: blank (no URL), or an
/// `https://` URL with a host, or an `http://` one to loopback; no
/// credentials, whitespace or control characters; surrounding whitespace
/// allowed (trimmed).
/// An IPv6 address in its colon-hex forms (what [`is_ipv6_literal`] accepts).
const IPV6: &str = concat!(
    "(?:(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}",
    "|(?:[0-9A-Fa-f]{1,4}:){1,7}:",
    "|(?:[0-9A-Fa-f]{1,4}:){1,6}:[0-9A-Fa-f]{1,4}",
    "|(?:[0-9A-Fa-f]{1,4}:){1,5}(?::[0-9A-Fa-f]{1,4}){1,2}",
    "|(?:[0-9A-Fa-f]{1,4}:){1,4}(?::[0-9A-Fa-f]{1,4}){1,3}",
    "|(?:[0-9A-Fa-f]{1,4}:){1,3}(?::[0-9A-Fa-f]{1,4}){1,4}",
    "|(?:[0-9A-Fa-f]{1,4}:){1,2}(?::[0-9A-Fa-f]{1,4}){1,5}",
    "|[0-9A-Fa-f]{1,4}:(?::[0-9A-Fa-f]{1,4}){1,6}",
    "|:(?:(?::[0-9A-Fa-f]{1,4}){1,7}|:))",
);

/// `v6` is an IPv6 address written in colon-hex (no dotted IPv4 tail).
fn is_ipv6_literal(v6: &str) -> bool {
    !v6.contains('.') && v6.parse::<std::net::Ipv6Addr>().is_ok()
}

pub fn notify_url_pattern() -> String {
    let ws = crate::text::WHITESPACE;
    // Neither whitespace nor a control character.
    let printable = format!(r"[^{ws}\x00-\x1f\x7f-\x9f]");
    let authority = format!(r"[^/?#@{ws}\x00-\x1f\x7f-\x9f]");
    let rest = format!(r"(?:[/?#]{printable}*)?");
    // An IPv6 literal (no embedded IPv4), then at most a port.
    let bracketed = format!(r"\[{IPV6}\](?::[0-9]*)?");
    let https_host = format!(r"(?:{bracketed}|[^\[:/?#@{ws}\x00-\x1f\x7f-\x9f]{authority}*)");
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])";
    let localhost = "[lL][oO][cC][aA][lL][hH][oO][sS][tT]";
    let loopback = format!(r"(?:(?:{localhost}|127\.{octet}\.{octet}\.{octet})(?::{authority}*)?|\[::1\]{authority}*)");
    format!(r"^[{ws}]*(?:https://{https_host}{rest}|http://{loopback}{rest})?[{ws}]*$")
}

#[cfg(feature = "openapi")]
fn notify_url_schema() -> utoipa::openapi::Object {
    views::openapi::nullable(views::openapi::string(&notify_url_pattern(), Some(MAX_URL_CHARS)))
}

/// Outbox relay target: an absolute `https://` URL, or `http://` to a relay
/// on this machine's loopback (notifications carry one-time codes).
fn validate_notify_url(url: &str) -> DomainResult<Option<String>> {
    if !crate::text::fits(url, MAX_URL_CHARS) {
        return Err(DomainError::invalid(
            "invalid_notify_url",
            format!("notify URL must be at most {MAX_URL_CHARS} characters"),
        ));
    }
    let url = url.trim();
    if url.is_empty() {
        return Ok(None);
    }
    let well_formed =
        !url.chars().any(|c| c.is_whitespace() || c.is_control()) && url_host(url).is_some_and(|h| !h.is_empty());
    if !well_formed {
        return Err(DomainError::invalid("invalid_notify_url", "notify URL must be an absolute https:// URL"));
    }
    // A bracketed host is an IPv6 address and nothing else, then at most a
    // port: other tools (and the relay's client) refuse anything looser.
    if url.starts_with("https://")
        && let Some(authority) = url_authority(url).filter(|a| a.starts_with('['))
    {
        let ok = authority[1..].split_once(']').is_some_and(|(v6, after)| {
            is_ipv6_literal(v6)
                && (after.is_empty() || after.strip_prefix(':').is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit())))
        });
        if !ok {
            return Err(DomainError::invalid(
                "invalid_notify_url",
                "a bracketed notify URL host must be an IPv6 address, then at most a :port",
            ));
        }
    }
    if url_authority(url).is_some_and(|a| a.contains('@')) {
        return Err(DomainError::invalid(
            "invalid_notify_url",
            "notify URL must not carry credentials (user:password@): they would be stored and audited",
        ));
    }
    if !notify_url_allowed(url) {
        return Err(DomainError::invalid(
            "insecure_notify_url",
            "notify URL must be https:// (plain http:// only to a relay on loopback: \
             localhost, 127.0.0.0/8, [::1]); notifications carry one-time codes",
        ));
    }
    Ok(Some(url.to_owned()))
}

/// Whether the outbox may send to this URL: https anywhere, http only to
/// loopback. Checked again at send time, so a URL stored before this rule
/// is refused rather than used.
pub fn notify_url_allowed(url: &str) -> bool {
    let Some(host) = url_host(url) else { return false };
    if url.starts_with("https://") {
        return true;
    }
    url.starts_with("http://") && is_loopback(host)
}

fn url_authority(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    rest.split(['/', '?', '#']).next()
}

/// The host of an http(s) URL: `[v6]` kept bracketed, the port dropped.
fn url_host(url: &str) -> Option<&str> {
    let authority = url_authority(url)?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.starts_with('[') {
        return host_port.find(']').map(|end| &host_port[..=end]);
    }
    Some(host_port.split_once(':').map_or(host_port, |(h, _)| h))
}

fn is_loopback(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    host == "localhost" || host == "[::1]" || host.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// Finds a tenant by slug, as the caller may see it.
pub async fn find<C: ConnectionTrait>(
    conn: &C,
    principal: &Principal,
    slug: &TenantSlug,
) -> DomainResult<tenant::Model> {
    // The drill tenant is not a tenant anyone manages (`evidence::drills`).
    let t = tenant::Entity::find()
        .filter(tenant::Column::Slug.eq(slug.as_str()))
        .filter(tenant::Column::Synthetic.eq(false))
        .one(conn)
        .await?
        .ok_or(DomainError::NotFound)?;
    if !principal.can_see_tenant(&t.id) {
        return Err(DomainError::NotFound);
    }
    Ok(t)
}

pub async fn create(db: &DatabaseConnection, principal: &Principal, new: NewTenant) -> DomainResult<TenantView> {
    let auth = principal.authorize(Permission::ManageTenants, Scope::Global)?;
    let slug = TenantSlug::parse(new.slug.as_str())?;
    let name = validate_name(new.name.as_deref().unwrap_or(&new.slug))?;
    let notify_url = validate_notify_url(new.notify_url.as_deref().unwrap_or(""))?;
    let txn = db::begin_write(db).await?;
    let model = tenant::ActiveModel {
        id: Set(ids::new_id()),
        slug: Set(slug.into_string()),
        name: Set(name),
        notify_url: Set(notify_url),
        created_at: Set(clock::now_ms()),
        // The rollout order (docs/architecture.md#rollout-order-and-sign-off):
        // retries stay off for a new tenant until the drills pass and an
        // administrator enables its cohort.
        retry_policy: Set(RetryPolicy::Disabled),
        synthetic: Set(false),
    }
    .insert(&txn)
    .await
    .map_err(db::conflict_if_unique("tenant_exists", format!("tenant {:?} already exists", new.slug)))?;
    let v = TenantView::try_from(model)?;
    super::defaults::retry_policy_v1(&txn, auth.actor(), &v.id, clock::now_ms()).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "tenant.create",
            target_kind: "tenant",
            target_id: v.slug.as_str(),
            tenant_id: Some(&v.id),
            before: None,
            after: Some(json!({"slug": v.slug, "name": v.name, "notify_url": v.notify_url})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(v)
}

/// Tenants the caller may see, by slug.
pub async fn list(db: &DatabaseConnection, principal: &Principal) -> DomainResult<Vec<TenantView>> {
    let mut q = tenant::Entity::find().filter(tenant::Column::Synthetic.eq(false)).order_by_asc(tenant::Column::Slug);
    if let Some(own) = principal.tenant_filter() {
        principal.authorize(Permission::ReadRegistry, Scope::Tenant(own))?;
        q = q.filter(tenant::Column::Id.eq(own));
    } else {
        principal.authorize(Permission::ReadRegistry, Scope::Global)?;
    }
    q.all(db).await?.into_iter().map(TenantView::try_from).collect()
}

pub async fn get(db: &DatabaseConnection, principal: &Principal, slug: &TenantSlug) -> DomainResult<TenantView> {
    let t = find(db, principal, slug).await?;
    principal.authorize(Permission::ReadRegistry, Scope::Tenant(&t.id))?;
    t.try_into()
}

pub async fn update(
    db: &DatabaseConnection,
    principal: &Principal,
    slug: &TenantSlug,
    patch: TenantPatch,
) -> DomainResult<TenantView> {
    let txn = db::begin_write(db).await?;
    let t = find(&txn, principal, slug).await?;
    let auth = principal.authorize(Permission::ManageTenants, Scope::Tenant(&t.id))?;
    let before = TenantView::try_from(t.clone())?;
    let name = patch.name.as_deref().map(validate_name).transpose()?;
    let notify_url = patch.notify_url.as_deref().map(validate_notify_url).transpose()?;
    if name.as_ref().is_none_or(|n| *n == t.name) && notify_url.as_ref().is_none_or(|u| *u == t.notify_url) {
        return Err(DomainError::nothing_to_change());
    }
    let mut active: tenant::ActiveModel = t.into();
    if let Some(name) = name {
        active.name = Set(name);
    }
    if let Some(url) = notify_url {
        active.notify_url = Set(url);
    }
    let after = TenantView::try_from(active.update(&txn).await?)?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "tenant.update",
            target_kind: "tenant",
            target_id: slug.as_str(),
            tenant_id: Some(&after.id),
            before: Some(json!({"name": before.name, "notify_url": before.notify_url})),
            after: Some(json!({"name": after.name, "notify_url": after.notify_url})),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(after)
}

/// The condition "this tenant id column is not the synthetic drill
/// tenant", for listings, gauges and the outbox worker, so that drill rows
/// never reach real tenants' figures or notifications.
pub fn not_synthetic_tenant(col: impl sea_orm::ColumnTrait) -> sea_orm::sea_query::SimpleExpr {
    use sea_orm::sea_query::{Expr, ExprTrait, Query};
    Expr::col(col).not_in_subquery(
        Query::select()
            .column(tenant::Column::Id)
            .from(tenant::Entity)
            .and_where(tenant::Column::Synthetic.eq(true))
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_urls_are_https_or_loopback_http() {
        for ok in [
            "https://relay.example/notify",
            "https://relay.example:8443/x?y=1",
            "http://127.0.0.1:9000/n",
            "http://localhost/n",
            "http://[::1]:8080/",
            "https://[2001:db8::1]:8443/n",
            "https://[::]/",
            "https://[1:2:3:4:5:6:7::]/",
            "http://127.8.9.10",
        ] {
            assert_eq!(validate_notify_url(ok).unwrap().as_deref(), Some(ok), "{ok}");
        }
        assert_eq!(validate_notify_url("  ").unwrap(), None);
        for (bad, code) in [
            ("https://[::ffff:1.2.3.4]/", "invalid_notify_url"),
            ("https://[]/", "invalid_notify_url"),
            ("https://[x]/", "invalid_notify_url"),
            ("https://[::1]x/", "invalid_notify_url"),
            ("https://[::1]:80a/", "invalid_notify_url"),
            ("https://[1:2:3:4::5:6:7:8]/", "invalid_notify_url"),
            ("http://relay.example/notify", "insecure_notify_url"),
            ("http://10.0.0.5/n", "insecure_notify_url"),
            ("http://127.0.0.1.evil.example/", "insecure_notify_url"),
            ("http://localhost.evil.example/", "insecure_notify_url"),
            ("https://user:pw@relay.example/", "invalid_notify_url"),
            ("http://x@127.0.0.1/", "invalid_notify_url"),
            ("ftp://relay.example/", "invalid_notify_url"),
            ("https:///path", "invalid_notify_url"),
            ("https://relay.example/a b", "invalid_notify_url"),
        ] {
            match validate_notify_url(bad) {
                Err(DomainError::Invalid { code: c, .. }) => assert_eq!(c, code, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert!(!notify_url_allowed("http://relay.example/"));
        assert!(notify_url_allowed("https://relay.example/"));
    }

    /// The documented pattern accepts exactly what the validator accepts.
    #[test]
    fn the_notify_url_pattern_is_the_validator() {
        let pattern = regex::Regex::new(&notify_url_pattern()).unwrap();
        for url in [
            "https://relay.example/notify",
            " https://relay.example:8443/x?y=1 ",
            "http://127.0.0.1:9000/n",
            "http://LocalHost/n",
            "http://[::1]:8080/",
            "http://127.8.9.10",
            "https://[2001:db8::1]:8443/n",
            "https://[::]/",
            "https://[1:2:3:4:5:6:7::]/",
            "https://[::ffff:1.2.3.4]/",
            "https://[]/",
            "https://[x]/",
            "https://[::1]x/",
            "https://[::1]:80a/",
            "https://[1:2:3:4::5:6:7:8]/",
            "http://127.0.0.01/",
            "http://127.256.0.1/",
            "",
            " \u{85}",
            "http://relay.example/notify",
            "http://10.0.0.5/n",
            "http://127.0.0.1.evil.example/",
            "http://localhost.evil.example/",
            "https://user:pw@relay.example/",
            "ftp://relay.example/",
            "https:///path",
            "https://:443/",
            "https://[::1/",
            "https://[fe80::1]x/",
            "https://relay.example/a b",
            "https://relay.example/\u{7f}",
            "https://relay.example/\u{feff}",
        ] {
            assert_eq!(pattern.is_match(url), validate_notify_url(url).is_ok(), "{url:?}");
        }
    }

    /// A stored slug outside the slug rule (the drills' synthetic tenant
    /// among them, which the registry never shows) is a corrupt row: an
    /// internal error, never a panic.
    #[test]
    fn a_stored_slug_outside_the_rule_is_an_internal_error() {
        let row = |slug: &str| tenant::Model {
            id: "t1".into(),
            slug: slug.into(),
            name: "Clinic A".into(),
            notify_url: None,
            created_at: 0,
            retry_policy: views::retry_policy::RetryPolicy::Disabled,
            synthetic: false,
        };
        assert_eq!(TenantView::try_from(row("clinic-a")).unwrap().slug, "clinic-a");
        for bad in ["Clinic A", "_drill", ""] {
            let e = TenantView::try_from(row(bad));
            assert!(matches!(e, Err(DomainError::Db(sea_orm::DbErr::Type(_)))), "{bad:?}: {e:?}");
        }
    }
}
