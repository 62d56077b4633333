//! A reviewer's decision: on a key's scope (`key_approvals.decision`) and on
//! an evidence bundle (`evidence_signoffs.decision`).

use crate::string_enum::string_enum;

string_enum! {
    /// What a reviewer decided (`key_approvals` also CHECKs the two words).
    pub enum Decision {
        Approved = "approved",
        Rejected = "rejected",
    }
}
