//! Signature schemes: which of CONTRACT §3's header formats a provider signs
//! with. Parsing a scheme named by a person lives with the registry.

use serde::{Deserialize, Serialize};

/// How an endpoint's providers sign (CONTRACT §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    StandardWebhooks,
    Stripe,
    Github,
}

impl Scheme {
    pub const ALL: [Scheme; 3] = [Scheme::StandardWebhooks, Scheme::Stripe, Scheme::Github];

    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::StandardWebhooks => "standard-webhooks",
            Scheme::Stripe => "stripe",
            Scheme::Github => "github",
        }
    }
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
