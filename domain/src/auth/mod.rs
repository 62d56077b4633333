//! Users, sessions, API tokens, login throttling and the role matrix.

mod policy;
mod principal;
pub mod sessions;
pub mod throttle;
pub mod tokens;
pub mod users;

pub use policy::{role_allows, Permission, Role};
pub use principal::{Actor, Authorized, Principal, Scope};
