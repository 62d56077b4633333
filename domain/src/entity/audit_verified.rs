//! `audit_verified`: the one row saying how far the audit chain was last
//! verified (`audit::verify_chain`), keyed so it cannot be moved by hand.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "audit_verified")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: i32,
    /// The last entry verified, and its link.
    pub seq: i64,
    pub hash: String,
    /// HMAC of (seq, hash) under the audit MAC key.
    pub mac: String,
    pub verified_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
