//! Whole floats as integers: `views::integral`, re-exported for the
//! domain's request types.

pub use views::integral::*;
