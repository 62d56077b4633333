//! Shared building blocks: the signed-in layout, feedback for forms, key
//! display and text formatting.

pub mod chart;
mod feedback;
pub mod filters;
pub mod format;
mod key;
mod layout;
mod loaded;
pub mod poll;
pub mod quarantine_labels;
mod table;

pub use feedback::{ActionError, FormError, LoadError, Notice, Refresh, ReturnedError, Submit};
pub use key::{Countdown, EventTypes, KeyPage, KeyScope, KeySummary, StatusBadge};
pub use layout::Layout;
pub use loaded::{IfLoaded, Loaded};
pub use table::Table;
