//! Tenants, endpoints, signing keys and their approvals, the KEK ring, users,
//! sessions, API tokens, login throttling and the audit hash chain.
//!
//! Times are unix milliseconds (BIGINT) so both engines compare them the same way.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Tenants {
    Table,
    Id,
    Slug,
    Name,
    NotifyUrl,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Endpoints {
    Table,
    Id,
    TenantId,
    Slug,
    Scheme,
    EventTypes,
    ToleranceSecs,
    MaxBodyBytes,
    Enabled,
    CreatedAt,
}

#[derive(DeriveIden)]
enum SigningKeys {
    Table,
    Id,
    TenantId,
    EndpointId,
    Status,
    EventTypes,
    ScopeHash,
    ApprovedScopeHash,
    SecretCiphertext,
    KekVersion,
    Owner,
    RotationOwner,
    ReplacesKeyId,
    OverlapSecs,
    CreatedBy,
    CreatedAt,
    ActivatedAt,
    ExpiresAt,
    RevokedAt,
    RevokedReason,
    LastVerifiedAt,
    VerifiedCount,
}

#[derive(DeriveIden)]
enum KeyApprovals {
    Table,
    Id,
    KeyId,
    Decision,
    Reviewer,
    Comment,
    ScopeHash,
    ScopeSummary,
    DecidedAt,
}

#[derive(DeriveIden)]
enum KekVersions {
    Table,
    Version,
    WrappedKey,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
    Username,
    PasswordHash,
    Role,
    TenantId,
    Disabled,
    CreatedAt,
    LastLoginAt,
}

#[derive(DeriveIden)]
enum Sessions {
    Table,
    IdDigest,
    UserId,
    CreatedAt,
    LastSeenAt,
    ExpiresAt,
}

#[derive(DeriveIden)]
enum ApiTokens {
    Table,
    Id,
    Name,
    Digest,
    Role,
    TenantId,
    CreatedBy,
    CreatedAt,
    RevokedAt,
    LastUsedAt,
}

#[derive(DeriveIden)]
enum LoginThrottle {
    Table,
    Subject,
    Failures,
    WindowStartedAt,
    LockedUntil,
}

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    Seq,
    At,
    Actor,
    ActorKind,
    Action,
    TargetKind,
    TargetId,
    TenantId,
    Before,
    After,
    PrevHash,
    Hash,
}

#[derive(DeriveIden)]
enum AuditHead {
    Table,
    Id,
    Seq,
    Hash,
}

const ROLES: [&str; 4] = ["admin", "reviewer", "clinic-admin", "oncall"];

fn one_of(column: impl IntoIden, values: &[&str]) -> SimpleExpr {
    Expr::col(column.into_iden()).is_in(values.iter().copied())
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(Tenants::Table)
                .if_not_exists()
                .col(string(Tenants::Id).primary_key())
                .col(string_uniq(Tenants::Slug))
                .col(string(Tenants::Name))
                .col(string_null(Tenants::NotifyUrl))
                .col(big_integer(Tenants::CreatedAt))
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(Endpoints::Table)
                .if_not_exists()
                .col(string(Endpoints::Id).primary_key())
                .col(string(Endpoints::TenantId))
                .col(string(Endpoints::Slug))
                .col(
                    string(Endpoints::Scheme)
                        .check(one_of(Endpoints::Scheme, &["standard-webhooks", "stripe", "github"])),
                )
                .col(text(Endpoints::EventTypes))
                .col(big_integer(Endpoints::ToleranceSecs))
                .col(big_integer(Endpoints::MaxBodyBytes))
                .col(boolean(Endpoints::Enabled))
                .col(big_integer(Endpoints::CreatedAt))
                .foreign_key(
                    ForeignKey::create()
                        .name("fk_endpoints_tenant")
                        .from(Endpoints::Table, Endpoints::TenantId)
                        .to(Tenants::Table, Tenants::Id),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ux_endpoints_tenant_slug")
                .table(Endpoints::Table)
                .col(Endpoints::TenantId)
                .col(Endpoints::Slug)
                .unique()
                .to_owned(),
        )
        .await?;
        // Target of the keys' composite foreign key: a key's endpoint must belong
        // to the key's own tenant, enforced by the database.
        m.create_index(
            Index::create()
                .name("ux_endpoints_id_tenant")
                .table(Endpoints::Table)
                .col(Endpoints::Id)
                .col(Endpoints::TenantId)
                .unique()
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(SigningKeys::Table)
                .if_not_exists()
                .col(string(SigningKeys::Id).primary_key())
                .col(string(SigningKeys::TenantId))
                .col(string(SigningKeys::EndpointId))
                .col(string(SigningKeys::Status).check(one_of(
                    SigningKeys::Status,
                    &["pending_approval", "active", "retiring", "expired", "revoked", "rejected"],
                )))
                .col(text(SigningKeys::EventTypes))
                .col(string(SigningKeys::ScopeHash))
                .col(string_null(SigningKeys::ApprovedScopeHash))
                .col(blob(SigningKeys::SecretCiphertext))
                .col(integer(SigningKeys::KekVersion))
                .col(string(SigningKeys::Owner))
                .col(string(SigningKeys::RotationOwner))
                .col(string_null(SigningKeys::ReplacesKeyId))
                .col(big_integer_null(SigningKeys::OverlapSecs))
                .col(string(SigningKeys::CreatedBy))
                .col(big_integer(SigningKeys::CreatedAt))
                .col(big_integer_null(SigningKeys::ActivatedAt))
                .col(big_integer_null(SigningKeys::ExpiresAt))
                .col(big_integer_null(SigningKeys::RevokedAt))
                .col(text_null(SigningKeys::RevokedReason))
                .col(big_integer_null(SigningKeys::LastVerifiedAt))
                .col(big_integer(SigningKeys::VerifiedCount).default(0))
                .foreign_key(
                    ForeignKey::create()
                        .name("fk_keys_tenant")
                        .from(SigningKeys::Table, SigningKeys::TenantId)
                        .to(Tenants::Table, Tenants::Id),
                )
                .foreign_key(
                    ForeignKey::create()
                        .name("fk_keys_endpoint_same_tenant")
                        .from_col(SigningKeys::EndpointId)
                        .from_col(SigningKeys::TenantId)
                        .to_tbl(Endpoints::Table)
                        .to_col(Endpoints::Id)
                        .to_col(Endpoints::TenantId),
                )
                .foreign_key(
                    ForeignKey::create()
                        .name("fk_keys_replaces")
                        .from(SigningKeys::Table, SigningKeys::ReplacesKeyId)
                        .to(SigningKeys::Table, SigningKeys::Id),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_keys_endpoint_status")
                .table(SigningKeys::Table)
                .col(SigningKeys::EndpointId)
                .col(SigningKeys::Status)
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_keys_kek_version")
                .table(SigningKeys::Table)
                .col(SigningKeys::KekVersion)
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(KeyApprovals::Table)
                .if_not_exists()
                .col(string(KeyApprovals::Id).primary_key())
                .col(string(KeyApprovals::KeyId))
                .col(string(KeyApprovals::Decision).check(one_of(KeyApprovals::Decision, &["approved", "rejected"])))
                .col(string(KeyApprovals::Reviewer))
                .col(text(KeyApprovals::Comment))
                .col(string(KeyApprovals::ScopeHash))
                .col(text(KeyApprovals::ScopeSummary))
                .col(big_integer(KeyApprovals::DecidedAt))
                .foreign_key(
                    ForeignKey::create()
                        .name("fk_approvals_key")
                        .from(KeyApprovals::Table, KeyApprovals::KeyId)
                        .to(SigningKeys::Table, SigningKeys::Id),
                )
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create().name("ix_approvals_key").table(KeyApprovals::Table).col(KeyApprovals::KeyId).to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(KekVersions::Table)
                .if_not_exists()
                .col(integer(KekVersions::Version).primary_key())
                .col(blob(KekVersions::WrappedKey))
                .col(big_integer(KekVersions::CreatedAt))
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(Users::Table)
                .if_not_exists()
                .col(string(Users::Id).primary_key())
                .col(string_uniq(Users::Username))
                .col(string(Users::PasswordHash))
                .col(string(Users::Role).check(one_of(Users::Role, &ROLES)))
                .col(string_null(Users::TenantId))
                .col(boolean(Users::Disabled))
                .col(big_integer(Users::CreatedAt))
                .col(big_integer_null(Users::LastLoginAt))
                .foreign_key(
                    ForeignKey::create()
                        .name("fk_users_tenant")
                        .from(Users::Table, Users::TenantId)
                        .to(Tenants::Table, Tenants::Id),
                )
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(Sessions::Table)
                .if_not_exists()
                .col(string(Sessions::IdDigest).primary_key())
                .col(string(Sessions::UserId))
                .col(big_integer(Sessions::CreatedAt))
                .col(big_integer(Sessions::LastSeenAt))
                .col(big_integer(Sessions::ExpiresAt))
                .foreign_key(
                    ForeignKey::create()
                        .name("fk_sessions_user")
                        .from(Sessions::Table, Sessions::UserId)
                        .to(Users::Table, Users::Id)
                        .on_delete(ForeignKeyAction::Cascade),
                )
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(ApiTokens::Table)
                .if_not_exists()
                .col(string(ApiTokens::Id).primary_key())
                .col(string(ApiTokens::Name))
                .col(string_uniq(ApiTokens::Digest))
                .col(string(ApiTokens::Role).check(one_of(ApiTokens::Role, &ROLES)))
                .col(string_null(ApiTokens::TenantId))
                .col(string(ApiTokens::CreatedBy))
                .col(big_integer(ApiTokens::CreatedAt))
                .col(big_integer_null(ApiTokens::RevokedAt))
                .col(big_integer_null(ApiTokens::LastUsedAt))
                .foreign_key(
                    ForeignKey::create()
                        .name("fk_tokens_tenant")
                        .from(ApiTokens::Table, ApiTokens::TenantId)
                        .to(Tenants::Table, Tenants::Id),
                )
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(LoginThrottle::Table)
                .if_not_exists()
                .col(string(LoginThrottle::Subject).primary_key())
                .col(integer(LoginThrottle::Failures))
                .col(big_integer(LoginThrottle::WindowStartedAt))
                .col(big_integer_null(LoginThrottle::LockedUntil))
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(AuditLog::Table)
                .if_not_exists()
                .col(big_integer(AuditLog::Seq).primary_key())
                .col(big_integer(AuditLog::At))
                .col(string(AuditLog::Actor))
                .col(string(AuditLog::ActorKind))
                .col(string(AuditLog::Action))
                .col(string(AuditLog::TargetKind))
                .col(string(AuditLog::TargetId))
                .col(string_null(AuditLog::TenantId))
                .col(text_null(AuditLog::Before))
                .col(text_null(AuditLog::After))
                .col(string(AuditLog::PrevHash))
                .col(string(AuditLog::Hash))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_audit_tenant_seq")
                .table(AuditLog::Table)
                .col(AuditLog::TenantId)
                .col(AuditLog::Seq)
                .to_owned(),
        )
        .await?;

        // One row that every audit append locks first: it serialises appends so
        // the hash chain never forks, on either engine.
        m.create_table(
            Table::create()
                .table(AuditHead::Table)
                .if_not_exists()
                .col(integer(AuditHead::Id).primary_key())
                .col(big_integer(AuditHead::Seq))
                .col(string(AuditHead::Hash))
                .to_owned(),
        )
        .await?;
        m.exec_stmt(
            Query::insert()
                .into_table(AuditHead::Table)
                .columns([AuditHead::Id, AuditHead::Seq, AuditHead::Hash])
                .values_panic([1.into(), 0i64.into(), "0".repeat(64).into()])
                .on_conflict(OnConflict::column(AuditHead::Id).do_nothing().to_owned())
                .to_owned(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            AuditHead::Table.into_iden(),
            AuditLog::Table.into_iden(),
            LoginThrottle::Table.into_iden(),
            ApiTokens::Table.into_iden(),
            Sessions::Table.into_iden(),
            Users::Table.into_iden(),
            KekVersions::Table.into_iden(),
            KeyApprovals::Table.into_iden(),
            SigningKeys::Table.into_iden(),
            Endpoints::Table.into_iden(),
            Tenants::Table.into_iden(),
        ] {
            m.drop_table(Table::drop().table(table).if_exists().to_owned()).await?;
        }
        Ok(())
    }
}
