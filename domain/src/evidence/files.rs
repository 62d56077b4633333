//! Modes and owners of the files Signet's secrets and data live in, read
//! live for each bundle: the data directory, the SQLite database file and
//! the master key file. The master key file open to group or others is a
//! critical finding (whoever reads it opens every sealed secret); the data
//! directory or database file open to them is a warning.

use std::path::{Path, PathBuf};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use crate::error::DomainResult;

use views::evidence::FileEvidence;

/// Where this process keeps its data and master key (the server's config
/// hands them to the [`crate::vault::Vault`]; `None` when not known, e.g.
/// a library caller).
#[derive(Debug, Clone, Default)]
pub struct DeploymentFiles {
    pub data_dir: Option<PathBuf>,
    /// The file the master key was read from; `None` with
    /// `master_key_from_env` when it came from `SIGNET_MASTER_KEY`.
    pub master_key_file: Option<PathBuf>,
    pub master_key_from_env: bool,
}

pub const DATA_DIR: &str = "data_dir";
pub const SQLITE_FILE: &str = "sqlite_file";
pub const MASTER_KEY_FILE: &str = "master_key_file";

/// Reads each known file's mode and owner. The SQLite file is the one the
/// connection has open (`PRAGMA database_list`), not one assumed from config.
pub async fn read(db: &DatabaseConnection, files: &DeploymentFiles) -> DomainResult<Vec<FileEvidence>> {
    let mut out = Vec::new();
    if let Some(dir) = &files.data_dir {
        out.push(stat(DATA_DIR, dir));
    }
    if db.get_database_backend() == DbBackend::Sqlite {
        let rows = db
            .query_all_raw(Statement::from_string(DbBackend::Sqlite, "SELECT name, file FROM pragma_database_list"))
            .await?;
        let main = rows.into_iter().find(|r| r.try_get::<String>("", "name").is_ok_and(|n| n == "main"));
        match main.and_then(|r| r.try_get::<String>("", "file").ok()).filter(|f| !f.is_empty()) {
            Some(file) => out.push(stat(SQLITE_FILE, Path::new(&file))),
            None => out.push(FileEvidence {
                role: SQLITE_FILE.into(),
                note: Some("in-memory database: no file".into()),
                ..Default::default()
            }),
        }
    }
    match (&files.master_key_file, files.master_key_from_env) {
        (Some(path), _) => out.push(stat(MASTER_KEY_FILE, path)),
        (None, true) => out.push(FileEvidence {
            role: MASTER_KEY_FILE.into(),
            note: Some("the master key was given in SIGNET_MASTER_KEY: no file".into()),
            ..Default::default()
        }),
        (None, false) => {}
    }
    Ok(out)
}

#[cfg(unix)]
fn stat(role: &str, path: &Path) -> FileEvidence {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mut row = FileEvidence { role: role.into(), path: Some(path.display().to_string()), ..Default::default() };
    match std::fs::metadata(path) {
        Ok(meta) => {
            let mode = meta.permissions().mode() & 0o7777;
            row.mode = Some(format!("{mode:04o}"));
            row.uid = Some(meta.uid());
            row.gid = Some(meta.gid());
            // Linux: /proc/self is owned by the process's effective user.
            row.owned_by_signet = std::fs::metadata("/proc/self").ok().map(|me| me.uid() == meta.uid());
            row.group_or_world_access = mode & 0o077 != 0;
        }
        Err(e) => row.note = Some(format!("cannot read: {}", e.kind())),
    }
    row
}

#[cfg(not(unix))]
fn stat(role: &str, path: &Path) -> FileEvidence {
    FileEvidence {
        role: role.into(),
        path: Some(path.display().to_string()),
        note: Some("modes are read on Unix only".into()),
        ..Default::default()
    }
}
