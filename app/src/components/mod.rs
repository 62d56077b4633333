//! Shared building blocks: the page frames (signed in, and before), loading
//! a page's data, feedback for forms and the fields several forms share,
//! tables, key display and text formatting.

pub mod chart;
mod feedback;
mod fields;
pub mod filters;
pub mod format;
mod key;
mod layout;
mod loaded;
pub mod poll;
pub mod quarantine_labels;
mod table;

pub use feedback::{ActionError, FormError, LoadError, Notice, Refresh, ReturnedError, Submit};
pub use fields::{ApproveAsField, Credentials, ReasonField};
pub use key::{Countdown, EventTypes, KeyPage, KeyScope, KeySummary, StatusBadge};
pub use layout::{AuthCard, Layout};
pub use loaded::{Awaited, IfLoaded, Loaded};
pub use table::Table;
