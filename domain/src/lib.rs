//! Signet's product logic, shared by the server (receiver, API, CLI) and the
//! Leptos server functions. No HTTP and no UI in here.

pub mod crypto;
