//! User accounts. Passwords are argon2id hashes; views never carry them.

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Actor, Principal, Scope, TenantName};
use crate::{
    audit::{self, Change},
    clock,
    crypto::{CryptoError, Password, hash_password},
    db,
    entity::{session, tenant, user},
    error::{DomainError, DomainResult},
    ids,
};
use views::{
    roles::{Permission, Role},
    users::UserView,
};

pub const MIN_PASSWORD_LEN: usize = 12;
pub const MAX_PASSWORD_LEN: usize = 256;

/// Input for [`create`].
#[derive(Debug)]
pub struct NewUser {
    pub username: String,
    pub role: Role,
    /// The tenant, parsed by the edge ([`TenantName::given`]); required for
    /// clinic admins, refused for other roles.
    pub tenant: Option<TenantName>,
    pub password: Password,
}

// The API's body; its edge parses it into a `UserChange` (this doc comment
// is the document's description, so it stays as it was).
/// Changes for [`update`]; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserPatch {
    pub role: Option<Role>,
    /// Tenant slug (clinic admins).
    pub tenant: Option<String>,
    pub disabled: Option<bool>,
}

/// Changes for [`update`], the tenant parsed; `None` leaves a field as it
/// is.
#[derive(Debug, Clone, Default)]
pub struct UserChange {
    pub role: Option<Role>,
    /// `Some(None)`: given empty, which binds to no tenant (refused for a
    /// clinic admin).
    pub tenant: Option<Option<TenantName>>,
    pub disabled: Option<bool>,
}

impl From<UserPatch> for UserChange {
    fn from(p: UserPatch) -> UserChange {
        UserChange { role: p.role, tenant: p.tenant.map(|t| TenantName::given(Some(&t))), disabled: p.disabled }
    }
}

/// Usernames: 2–[`MAX_USERNAME_LEN`] of a-z, 0-9, `.`, `_`, `-`, `@`,
/// starting with a letter or digit.
pub const MAX_USERNAME_LEN: usize = 64;

/// [`validate_username`] as a regular expression.
pub fn username_pattern() -> String {
    format!("^[a-z0-9][a-z0-9._@-]{{1,{}}}$", MAX_USERNAME_LEN - 1)
}

/// A username's schema.
#[cfg(feature = "openapi")]
pub fn username_schema() -> utoipa::openapi::Object {
    views::openapi::string(&username_pattern(), Some(MAX_USERNAME_LEN))
}

/// An optional password's schema ([`validate_password`]).
#[cfg(feature = "openapi")]
pub fn password_schema() -> utoipa::openapi::Object {
    let mut s = views::openapi::nullable(views::openapi::string(".", Some(MAX_PASSWORD_LEN)));
    s.pattern = None;
    s.min_length = Some(MIN_PASSWORD_LEN);
    s
}

pub fn validate_username(name: &str) -> DomainResult<()> {
    let ok = (2..=MAX_USERNAME_LEN).contains(&name.len())
        && name.as_bytes().first().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-@".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(DomainError::invalid(
            "invalid_username",
            "username must be 2–64 characters of a-z, 0-9, '.', '_', '-', '@', starting with a letter or digit",
        ))
    }
}

pub fn validate_password(pw: &Password) -> DomainResult<()> {
    let n = pw.expose().chars().count();
    if n < MIN_PASSWORD_LEN {
        return Err(DomainError::invalid(
            "weak_password",
            format!("password must be at least {MIN_PASSWORD_LEN} characters"),
        ));
    }
    if n > MAX_PASSWORD_LEN {
        return Err(DomainError::invalid("invalid_password", "password is too long"));
    }
    Ok(())
}

async fn tenant_id_for<C: ConnectionTrait>(
    conn: &C,
    role: Role,
    tenant: Option<&TenantName>,
) -> DomainResult<Option<String>> {
    match (role.is_tenant_bound(), tenant) {
        (true, None) => Err(DomainError::invalid("tenant_required", "a clinic admin needs a tenant")),
        (false, Some(_)) => Err(DomainError::invalid(
            "tenant_not_allowed",
            format!("role {role} is not bound to a tenant; leave the tenant empty"),
        )),
        (false, None) => Ok(None),
        (true, Some(name)) => super::binding::bindable_id(conn, name).await.map(Some),
    }
}

async fn view<C: ConnectionTrait>(conn: &C, u: user::Model) -> DomainResult<UserView> {
    let tenant = match &u.tenant_id {
        Some(id) => {
            tenant::Entity::find_by_id(id.clone()).one(conn).await?.map(|t| ids::stored(&t.slug)).transpose()?
        }
        None => None,
    };
    Ok(UserView {
        id: u.id,
        username: u.username,
        role: Role::parse(&u.role).unwrap_or(Role::Oncall),
        tenant,
        disabled: u.disabled,
        created_at: clock::rfc3339(u.created_at),
        last_login_at: clock::rfc3339_opt(u.last_login_at),
    })
}

fn summary(v: &UserView) -> serde_json::Value {
    json!({"username": v.username, "role": v.role, "tenant": v.tenant, "disabled": v.disabled})
}

/// A new user checked and with its password hashed (on the hash pool,
/// outside any transaction: argon2 takes tens of milliseconds and 19 MiB).
struct Prepared {
    new: NewUser,
    password_hash: String,
}

async fn prepare(new: NewUser) -> DomainResult<Prepared> {
    validate_username(&new.username)?;
    validate_password(&new.password)?;
    let password = Password::new(new.password.expose().to_owned());
    let hashed = super::hash_pool::run(move || hash_password(&password)).await.ok_or(CryptoError::PasswordHash)??;
    Ok(Prepared { new, password_hash: hashed })
}

async fn insert_user<C: ConnectionTrait>(conn: &C, actor: &Actor, prepared: Prepared) -> DomainResult<UserView> {
    let Prepared { new, password_hash } = prepared;
    let tenant_id = tenant_id_for(conn, new.role, new.tenant.as_ref()).await?;
    let exists = user::Entity::find().filter(user::Column::Username.eq(&new.username)).count(conn).await?;
    if exists > 0 {
        return Err(DomainError::conflict("username_taken", format!("user {:?} already exists", new.username)));
    }
    let model = user::ActiveModel {
        id: Set(ids::new_id()),
        username: Set(new.username.clone()),
        password_hash: Set(password_hash),
        role: Set(new.role.as_str().to_owned()),
        tenant_id: Set(tenant_id.clone()),
        disabled: Set(false),
        created_at: Set(clock::now_ms()),
        last_login_at: Set(None),
    }
    .insert(conn)
    .await
    .map_err(db::conflict_if_unique("username_taken", "that username is taken"))?;
    let v = view(conn, model).await?;
    audit::record(
        conn,
        actor,
        Change {
            action: "user.create",
            target_kind: "user",
            target_id: &v.username,
            tenant_id: tenant_id.as_deref(),
            before: None,
            after: Some(summary(&v)),
        },
    )
    .await?;
    Ok(v)
}

/// Creates a user (admins and the CLI).
pub async fn create(db: &DatabaseConnection, principal: &Principal, new: NewUser) -> DomainResult<UserView> {
    let auth = principal.authorize(Permission::ManageUsers, Scope::Global)?;
    let prepared = prepare(new).await?;
    let txn = db::begin_write(db).await?;
    let v = insert_user(&txn, auth.actor(), prepared).await?;
    txn.commit().await?;
    Ok(v)
}

/// Whether any user exists (the server offers a setup link until one does).
pub async fn any_exist(db: &DatabaseConnection) -> DomainResult<bool> {
    Ok(user::Entity::find().count(db).await? > 0)
}

/// Creates the first administrator from the one-time setup link. Refused
/// once any user exists. The audit append inside takes the audit head lock
/// first, which serialises two racing bootstraps on both engines, so the
/// emptiness check below cannot be raced.
pub async fn bootstrap_admin(db: &DatabaseConnection, username: String, password: Password) -> DomainResult<UserView> {
    let prepared = prepare(NewUser { username: username.clone(), role: Role::Admin, tenant: None, password }).await?;
    let txn = db::begin_write(db).await?;
    audit::record(
        &txn,
        &Actor::System,
        Change {
            action: "setup.bootstrap",
            target_kind: "user",
            target_id: &username,
            tenant_id: None,
            before: None,
            after: None,
        },
    )
    .await?;
    if user::Entity::find().count(&txn).await? > 0 {
        return Err(DomainError::conflict("already_set_up", "an administrator already exists; sign in instead"));
    }
    let v = insert_user(&txn, &Actor::System, prepared).await?;
    txn.commit().await?;
    Ok(v)
}

/// All users (admins only).
pub async fn list(db: &DatabaseConnection, principal: &Principal) -> DomainResult<Vec<UserView>> {
    principal.authorize(Permission::ManageUsers, Scope::Global)?;
    let rows = user::Entity::find().order_by_asc(user::Column::Username).all(db).await?;
    let mut out = Vec::with_capacity(rows.len());
    for u in rows {
        out.push(view(db, u).await?);
    }
    Ok(out)
}

/// Changes role, tenant binding or the disabled flag. Disabling ends the
/// user's sessions at once. The last enabled admin cannot be demoted or
/// disabled.
pub async fn update(
    db: &DatabaseConnection,
    principal: &Principal,
    username: &str,
    patch: UserChange,
) -> DomainResult<UserView> {
    let auth = principal.authorize(Permission::ManageUsers, Scope::Global)?;
    let txn = db::begin_write(db).await?;
    let u = user::Entity::find()
        .filter(user::Column::Username.eq(username))
        .one(&txn)
        .await?
        .ok_or(DomainError::NotFound)?;
    let before = view(&txn, u.clone()).await?;
    // A role this build does not know signs nobody in (fail closed); an
    // unrelated change must not quietly turn it into the view's stand-in.
    if Role::parse(&u.role).is_none() && patch.role.is_none() {
        return Err(DomainError::conflict(
            "unknown_role",
            format!("{username} has a stored role this version does not know ({:?}); set a role explicitly", u.role),
        ));
    }
    let role = patch.role.unwrap_or(before.role);
    let bound = || before.tenant.clone().map(TenantName::from);
    let tenant = match (patch.role, patch.tenant) {
        (_, Some(given)) => given,
        (Some(_), None) if role.is_tenant_bound() => bound(),
        (Some(_), None) => None,
        (None, None) => bound(),
    };
    let tenant_id = tenant_id_for(&txn, role, tenant.as_ref()).await?;
    let disabled = patch.disabled.unwrap_or(u.disabled);
    if role == before.role && tenant_id == u.tenant_id && disabled == u.disabled {
        return Err(DomainError::nothing_to_change());
    }
    let was_active_admin = before.role == Role::Admin && !before.disabled;
    if was_active_admin && (role != Role::Admin || disabled) {
        // Every enabled admin row is locked before counting them, so two
        // concurrent demotions (of the last two) see each other: the second
        // waits, then counts one. SQLite's write transaction is already
        // exclusive.
        let mut q =
            user::Entity::find().filter(user::Column::Role.eq("admin")).filter(user::Column::Disabled.eq(false));
        if txn.get_database_backend() == sea_orm::DbBackend::Postgres {
            q = q.lock_exclusive();
        }
        let admins = q.all(&txn).await?.len();
        if admins <= 1 {
            return Err(DomainError::conflict("last_admin", "this is the last enabled administrator"));
        }
    }
    let mut active: user::ActiveModel = u.clone().into();
    active.role = Set(role.as_str().to_owned());
    active.tenant_id = Set(tenant_id.clone());
    active.disabled = Set(disabled);
    let updated = active.update(&txn).await?;
    if disabled || role != before.role || tenant_id != u.tenant_id {
        // Sessions carry the old rights; end them.
        session::Entity::delete_many().filter(session::Column::UserId.eq(&u.id)).exec(&txn).await?;
    }
    let after = view(&txn, updated).await?;
    audit::record(
        &txn,
        auth.actor(),
        Change {
            action: "user.update",
            target_kind: "user",
            target_id: username,
            tenant_id: tenant_id.as_deref().or(u.tenant_id.as_deref()),
            before: Some(summary(&before)),
            after: Some(summary(&after)),
        },
    )
    .await?;
    txn.commit().await?;
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_username_pattern_is_the_validator() {
        let pattern = regex::Regex::new(&username_pattern()).unwrap();
        for u in ["ab", "a", "rita", "r.ita@x_y-z", "-ab", "Ab", "a b", &"a".repeat(64), &"a".repeat(65)] {
            assert_eq!(pattern.is_match(u), validate_username(u).is_ok(), "{u:?}");
        }
    }
}
