//! Field redaction for event bodies shown to people. Which fields count as
//! sensitive is deployment configuration (`SIGNET_REDACT_FIELDS`); the
//! default covers the personal data a reminder payload typically carries.

use serde_json::Value;

pub const DEFAULT_FIELDS: &[&str] = &[
    "name",
    "first_name",
    "last_name",
    "patient_name",
    "patient",
    "phone",
    "email",
    "dob",
    "date_of_birth",
    "address",
    "notes",
    "code",
    "ssn",
];

pub const MASK: &str = "[redacted]";

/// The configured field names, compared case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    fields: Vec<String>,
}

impl Default for Redaction {
    fn default() -> Self {
        Redaction::new(DEFAULT_FIELDS.iter().copied())
    }
}

impl Redaction {
    pub fn new<'a>(fields: impl IntoIterator<Item = &'a str>) -> Self {
        Redaction {
            fields: fields.into_iter().map(|f| f.trim().to_ascii_lowercase()).filter(|f| !f.is_empty()).collect(),
        }
    }

    /// From a comma-separated list; `None` keeps the default.
    pub fn from_config(list: Option<&str>) -> Self {
        list.map_or_else(Redaction::default, |l| Redaction::new(l.split(',')))
    }

    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// Replaces the value of every configured field, at any depth.
    pub fn apply(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if self.fields.iter().any(|f| f.eq_ignore_ascii_case(k)) {
                        *v = Value::String(MASK.to_owned());
                    } else {
                        self.apply(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.apply(v)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn redacts_configured_fields_at_any_depth() {
        let mut v = json!({
            "type": "reminder.created",
            "data": {"reminder_id": "r1", "Phone": "+41 79", "contacts": [{"email": "a@b"}]},
        });
        Redaction::default().apply(&mut v);
        assert_eq!(v["data"]["reminder_id"], "r1");
        assert_eq!(v["data"]["Phone"], MASK);
        assert_eq!(v["data"]["contacts"][0]["email"], MASK);
        let mut v = json!({"data": {"reminder_id": "r1", "phone": "x"}});
        Redaction::from_config(Some("reminder_id")).apply(&mut v);
        assert_eq!(v["data"]["reminder_id"], MASK);
        assert_eq!(v["data"]["phone"], "x");
    }
}
