//! One module a page.

mod placeholder;

pub use placeholder::*;
