//! `SqliteToolStore(path)`: specs in an embedded SQLite database file (the library is compiled
//! into the addon). WAL mode, a busy timeout and `BEGIN IMMEDIATE` writes make it safe for several
//! processes at once; a `schema_version` table and numbered migrations, applied in one immediate
//! transaction, let later versions change the schema. Every call runs on the blocking pool.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;

use super::ToolStore;
use crate::error::{Code, Error, Result};
use crate::templates::WorkspaceToolSpec;

/// How long a call waits for another process's write lock before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The schema, one step per version.
const MIGRATIONS: [&str; 1] = ["CREATE TABLE workspace_tools (
        workspace_id TEXT NOT NULL,
        name TEXT NOT NULL,
        spec TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (workspace_id, name)
    ) WITHOUT ROWID"];

pub struct SqliteToolStore {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
}

/// Whether an error is another process holding the database's lock.
fn busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::DatabaseBusy || f.code == rusqlite::ErrorCode::DatabaseLocked)
}

/// `f` until it is not told "busy", or the busy timeout has passed: switching a new file to WAL, or
/// its first write, while another process does the same can answer "busy" at once, without
/// waiting on the busy timeout.
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let started = std::time::Instant::now();
    loop {
        match f() {
            Err(e) if busy(&e) && started.elapsed() < BUSY_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(10 + rand::random::<u64>() % 40));
            }
            other => return other,
        }
    }
}

fn db_error(path: &std::path::Path, e: rusqlite::Error) -> Error {
    let what = if busy(&e) { "the database stayed locked by another process" } else { "the database failed" };
    Error::new(Code::Io, format!("SqliteToolStore {}: {what}: {e}", path.display()))
}

impl SqliteToolStore {
    /// Opens (or creates) the database and brings its schema up to date.
    pub fn open(path: impl Into<PathBuf>) -> Result<SqliteToolStore> {
        let path = path.into();
        let conn = Connection::open(&path)
            .map_err(|e| Error::config(format!("SqliteToolStore: cannot open {}: {e}", path.display())))?;
        let setup = || -> rusqlite::Result<()> {
            conn.busy_timeout(BUSY_TIMEOUT)?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
            Ok(())
        };
        retry_busy(setup).map_err(|e| db_error(&path, e))?;
        let mut store = SqliteToolStore { path, conn: Arc::new(Mutex::new(conn)) };
        store.migrate()?;
        Ok(store)
    }

    /// Applies the migrations past the stored version, in one transaction that holds the write
    /// lock, so two processes opening a new file at once migrate it once.
    fn migrate(&mut self) -> Result<()> {
        let path = self.path.clone();
        let mut conn = self.conn.lock().unwrap();
        let run = |conn: &mut Connection| -> rusqlite::Result<()> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let version: i64 =
                tx.query_row("SELECT COALESCE(MAX(version), 0) FROM schema_version", [], |r| r.get(0))?;
            for (i, sql) in MIGRATIONS.iter().enumerate() {
                let v = i as i64 + 1;
                if v > version {
                    tx.execute_batch(sql)?;
                    tx.execute("INSERT INTO schema_version (version) VALUES (?1)", params![v])?;
                }
            }
            tx.commit()
        };
        retry_busy(|| run(&mut conn)).map_err(|e| db_error(&path, e))
    }

    /// The schema version the database is at.
    pub fn version(&self) -> Result<i64> {
        let conn = self.conn.lock().unwrap();
        conn.query_row("SELECT COALESCE(MAX(version), 0) FROM schema_version", [], |r| r.get(0))
            .map_err(|e| db_error(&self.path, e))
    }

    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let (conn, path) = (self.conn.clone(), self.path.clone());
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap();
            f(&mut conn).map_err(|e| db_error(&path, e))
        })
        .await
        .map_err(|e| Error::new(Code::Io, format!("internal error: {e}")))?
    }
}

fn parse(text: String) -> rusqlite::Result<Value> {
    serde_json::from_str(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, Box::new(e)))
}

#[async_trait]
impl ToolStore for SqliteToolStore {
    async fn get(&self, workspace: &str, name: &str) -> Result<Option<Value>> {
        let (w, n) = (workspace.to_string(), name.to_string());
        self.with(move |c| {
            c.query_row("SELECT spec FROM workspace_tools WHERE workspace_id = ?1 AND name = ?2", params![w, n], |r| {
                r.get::<_, String>(0)
            })
            .optional()?
            .map(parse)
            .transpose()
        })
        .await
    }

    async fn put(&self, workspace: &str, spec: &WorkspaceToolSpec) -> Result<()> {
        let (w, n, text) = (workspace.to_string(), spec.name.clone(), spec.to_json().to_string());
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        self.with(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute(
                "INSERT INTO workspace_tools (workspace_id, name, spec, updated_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (workspace_id, name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at",
                params![w, n, text, now],
            )?;
            tx.commit()
        })
        .await
    }

    async fn delete(&self, workspace: &str, name: &str) -> Result<bool> {
        let (w, n) = (workspace.to_string(), name.to_string());
        self.with(move |c| {
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let n = tx.execute("DELETE FROM workspace_tools WHERE workspace_id = ?1 AND name = ?2", params![w, n])?;
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }

    async fn list(&self, workspace: &str) -> Result<Vec<Value>> {
        let w = workspace.to_string();
        self.with(move |c| {
            let mut stmt = c.prepare("SELECT spec FROM workspace_tools WHERE workspace_id = ?1 ORDER BY name")?;
            let rows = stmt.query_map(params![w], |r| r.get::<_, String>(0))?;
            rows.map(|r| r.and_then(parse)).collect()
        })
        .await
    }
}
