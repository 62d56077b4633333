//! The OpenAPI building blocks live in `views::openapi` (the views use them
//! too); re-exported here for the domain's request types.

pub use views::openapi::*;
