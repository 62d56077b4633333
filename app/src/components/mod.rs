//! Shared building blocks: the signed-in layout, status badges, form errors.

mod layout;

pub use layout::{FormError, Layout, StatusBadge};
