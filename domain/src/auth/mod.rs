//! Users, sessions, API tokens and login throttling (the role matrix is
//! `views::roles`, so the console asks the same table the domain authorizes
//! by).

mod binding;
pub mod failures;
mod hash_pool;
pub mod principal;
pub mod sessions;
pub mod throttle;
pub mod tokens;
pub mod users;

pub use binding::TenantName;
pub use principal::{Actor, Authorized, Principal, Scope};

/// The principal as it stands now. Work that runs on after the request that
/// started it (a bulk release) re-reads its principal, so a disabled user, a
/// changed role or a revoked token stops it.
pub async fn current(db: &sea_orm::DatabaseConnection, p: &Principal) -> crate::error::DomainResult<Principal> {
    match &p.actor {
        Actor::Cli | Actor::System => Ok(p.clone()),
        stored => of_actor(db, stored).await,
    }
}

/// The principal of a stored actor (a job's authority) as it stands now: a
/// user or token is re-read (disabled or revoked: refused; otherwise with
/// its role today); the CLI and the system have their fixed rights.
pub async fn of_actor(db: &sea_orm::DatabaseConnection, actor: &Actor) -> crate::error::DomainResult<Principal> {
    use sea_orm::EntityTrait;
    match actor {
        Actor::User { id, .. } => match crate::entity::user::Entity::find_by_id(id.clone()).one(db).await? {
            Some(u) if !u.disabled => sessions::principal_for(&u),
            _ => Err(crate::error::DomainError::Unauthenticated),
        },
        Actor::Token { id, .. } => tokens::current(db, id).await,
        Actor::Cli => Ok(Principal::cli()),
        Actor::System => Ok(Principal::system()),
    }
}
