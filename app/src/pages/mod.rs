//! One module a page.

mod approvals;
mod audit;
mod dashboard;
mod home;
mod login;
mod not_found;
mod outbox;
mod quarantine;
mod quarantine_event;
mod retention;
mod retry_policy;
mod revoke;
mod rotate;
mod secret;
mod setup;
mod tenant;
mod tenants;
mod users;

pub use approvals::ApprovalsPage;
pub use audit::AuditPage;
pub use dashboard::DashboardPage;
pub use home::HomePage;
pub use login::LoginPage;
pub use not_found::NotFound;
pub use outbox::OutboxPage;
pub use quarantine::QuarantinePage;
pub use quarantine_event::QuarantineEventPage;
pub use retention::RetentionPage;
pub use revoke::RevokePage;
pub use rotate::RotatePage;
pub use secret::SecretPage;
pub use setup::SetupPage;
pub use tenant::TenantPage;
pub use tenants::TenantsPage;
pub use users::UsersPage;
