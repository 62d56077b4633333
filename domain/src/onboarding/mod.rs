//! Onboarding a provider (issue 26 item 3): what an endpoint expects a
//! provider to send ([`guide`]), and a test delivery signed with the
//! endpoint's own key that goes through the real receiver and keeps nothing
//! ([`test_delivery`]).

pub mod guide;
pub mod signing;
pub mod test_delivery;

pub use guide::guide;
pub use test_delivery::{TestRequest, send_test};
