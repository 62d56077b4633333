//! The role matrix lives in the `views` crate, so that the console asks the
//! same table the domain authorizes by.

pub use views::roles::{Permission, Role, role_allows};
