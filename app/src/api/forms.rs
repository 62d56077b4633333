//! Strict server-function input: a field (form body or query parameter)
//! that the called server function does not take is refused, naming it, as
//! `/api/v1` refuses unknown JSON fields. The server's body guard asks
//! [`unknown_field`] before any server function runs.
//!
//! Each server function's fields are read from its own argument struct (the
//! names serde would accept), so the rule cannot drift from the code; the
//! test below fails when a server function is missing from [`ALL`].

use serde::de::{self, Deserialize, Visitor};
use server_fn::ServerFn;

use super::*;

/// The argument names `T` deserializes (the fields its struct declares).
fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut seen: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames(&mut seen));
    seen
}

/// A deserializer that only records the fields a struct asks for.
struct FieldNames<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("field names read")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Stop
    }
}

impl<'de> de::Deserializer<'de> for FieldNames<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        *self.0 = fields;
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit unit_struct
        newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

macro_rules! server_fns {
    ($($f:ty),* $(,)?) => {
        /// Every server function: its path and the fields it takes.
        pub fn all() -> Vec<(&'static str, &'static [&'static str])> {
            vec![$((<$f as ServerFn>::PATH, fields_of::<$f>())),*]
        }
    };
}

server_fns!(
    audit::AuditLog,
    events::StoryOfEvent,
    events::LocateEvent,
    kek::KekOverview,
    kek::RotateKek,
    kek::StartRewrap,
    kek::ResumeRewrap,
    kek::CancelRewrap,
    kek::RetireKek,
    evidence::EvidencePage,
    evidence::DrillRun,
    evidence::StartDrills,
    evidence::ExportEvidence,
    evidence::SignOffEvidence,
    keys::ProvisionKey,
    keys::RotateKey,
    keys::RevokeKey,
    keys::GetKey,
    keys::RevealSecret,
    operations::ListQuarantine,
    operations::QuarantineDetail,
    operations::RevealQuarantineBody,
    operations::ShownQuarantineBody,
    operations::ReleaseQuarantine,
    operations::DiscardQuarantine,
    operations::StartBulkRelease,
    operations::BulkRelease,
    operations::RecentBulkReleases,
    operations::ResumeBulkRelease,
    operations::CancelBulkRelease,
    operations::RetryPolicy,
    operations::SetRetryPolicy,
    operations::RollbackRetryPolicy,
    operations::SetRetryPolicyCohort,
    operations::CohortContext,
    operations::RetryOverrides,
    operations::DecideOverride,
    operations::ListOutbox,
    operations::RetryOutbox,
    registry::ListTenants,
    registry::CreateTenant,
    registry::LoadTenant,
    registry::CreateEndpoint,
    registry::SetEndpointEnabled,
    registry::EndpointOnboarding,
    registry::SendTestDelivery,
    retention::RetentionOverview,
    retention::SetRetention,
    retention::SetHorizon,
    review::ReviewQueue,
    review::ApprovalHistory,
    review::ApproveKey,
    review::RejectKey,
    session::Whoami,
    session::SetupOpen,
    session::Login,
    session::Logout,
    session::SetupAdmin,
    stats::DashboardStats,
    users::ListUsers,
    users::CreateUser,
    users::UpdateUser,
);

/// Every server function's path with its fields, built once.
pub static ALL: std::sync::LazyLock<std::collections::HashMap<&'static str, &'static [&'static str]>> =
    std::sync::LazyLock::new(|| all().into_iter().collect());

/// The first name in a form body or query string (`a=1&b[0]=2`) that the
/// server function at `path` does not take; `None` when every name is one
/// of its fields, or `path` is no server function (the router answers that).
pub fn unknown_field(path: &str, encoded: &[u8]) -> Option<String> {
    let fields = ALL.get(path)?;
    form_urlencoded::parse(encoded).map(|(name, _)| name).find_map(|name| {
        // serde_qs nests with brackets: `types[0]`, `filter[tenant]`.
        let top = name.split('[').next().unwrap_or_default();
        (!fields.contains(&top)).then(|| name.into_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_server_function_is_listed_with_its_fields() {
        let registered: std::collections::BTreeSet<String> = server_fn::axum::server_fn_paths()
            .map(|(path, _)| path.to_owned())
            .filter(|p| p.starts_with("/fn/"))
            .collect();
        let listed: std::collections::BTreeSet<String> = ALL.keys().map(|p| (*p).to_owned()).collect();
        assert_eq!(registered, listed, "a server function is missing from forms::server_fns!");
        assert_eq!(ALL["/fn/login"], &["username", "password", "next"]);
        assert_eq!(ALL["/fn/logout"], &[] as &[&str]);
    }

    #[test]
    fn unknown_names_are_found_and_known_ones_pass() {
        assert_eq!(unknown_field("/fn/login", b"username=a&password=b&next=%2F"), None);
        assert_eq!(unknown_field("/fn/login", b"username=a&password=b&admin=true").as_deref(), Some("admin"));
        assert_eq!(unknown_field("/fn/login", b"user%6eame=a&x%5B0%5D=1").as_deref(), Some("x[0]"));
        assert_eq!(unknown_field("/fn/no_such_function", b"a=1"), None);
    }
}
