//! `PostgresToolStore({ connectionString, schema?, poolSize? })`: specs in a PostgreSQL (13 or
//! later) table that any number of API servers share. A small pool (`deadpool-postgres`) of at
//! most `poolSize` connections; the schema is made and migrated on first use, numbered like the
//! SQLite store's and under an advisory lock, so processes that start together migrate once.
//! Upserts are one statement (atomic); `list` sorts by code unit (`COLLATE "C"`) whatever the
//! database's collation. TLS as the connection string asks, through rustls. A call that cannot
//! reach the server fails within `CALL_TIMEOUT`; the next call takes a fresh connection. No error
//! names the password.

mod tls;

use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use serde_json::Value;
use tokio::sync::OnceCell;

use super::ToolStore;
use crate::error::{Code, Error, Result};
use crate::templates::WorkspaceToolSpec;

/// The longest one call waits: for a connection, and for its statement.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Connecting to the server, part of the call's time.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// `poolSize` when not given, and its bounds.
pub const DEFAULT_POOL_SIZE: usize = 8;
const MAX_POOL_SIZE: usize = 256;
/// An advisory lock key of corral's own: migrations hold it.
const MIGRATION_LOCK: i64 = 0x636f_7272_616c_0001;

/// The schema, one step per version; `{schema}` is the (quoted) schema name. `spec` is `json`,
/// not `jsonb`: a spec reads back with its keys in the order they were written (the order of a
/// tool's parameters is the order a model sees them in).
const MIGRATIONS: [&str; 1] = ["CREATE TABLE {schema}.workspace_tools (
        workspace_id TEXT NOT NULL,
        name TEXT NOT NULL,
        spec JSON NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (workspace_id, name)
    )"];

pub struct PostgresToolStore {
    pool: Pool,
    /// `"schema"`, quoted for SQL.
    quoted_schema: String,
    /// The schema's name as given (or the default).
    schema: String,
    /// Where the server is (host, port, database, user): what errors name instead of the
    /// connection string.
    target: String,
    migrated: OnceCell<()>,
}

/// The options of `new PostgresToolStore(...)`.
pub struct PostgresOptions {
    pub connection_string: String,
    pub schema: String,
    pub pool_size: usize,
}

impl PostgresOptions {
    pub fn from_json(v: &Value) -> Result<PostgresOptions> {
        let r = crate::options::Reader::new("PostgresToolStore", v, &["connectionString", "schema", "poolSize"])?;
        let connection_string = r.string("connectionString")?.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
            Error::config(
                "PostgresToolStore: connectionString is required (postgres://user:password@host:port/database).",
            )
        })?;
        let schema = r.string("schema")?.unwrap_or_else(|| "corral".to_string());
        if schema.is_empty() || schema.len() > 63 || !schema.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::config(
                "PostgresToolStore: schema must be 1 to 63 letters, digits or '_' (default corral).",
            ));
        }
        let pool_size = r.int("poolSize", DEFAULT_POOL_SIZE as u64, 1..=MAX_POOL_SIZE as u64)? as usize;
        Ok(PostgresOptions { connection_string, schema, pool_size })
    }
}

impl PostgresToolStore {
    /// Checks the options and makes the pool; nothing connects until the first call.
    pub fn new(options: PostgresOptions) -> Result<PostgresToolStore> {
        let parsed = tls::parse(&options.connection_string)?;
        let mut config = parsed.config;
        config.connect_timeout(CONNECT_TIMEOUT);
        config.application_name("corral");
        let target = target_of(&config);
        let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Verified };
        let manager = match parsed.tls {
            Some(tls) => Manager::from_config(config, tls, manager_config),
            None => Manager::from_config(config, tokio_postgres::NoTls, manager_config),
        };
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .wait_timeout(Some(CALL_TIMEOUT))
            .create_timeout(Some(CALL_TIMEOUT))
            .recycle_timeout(Some(CALL_TIMEOUT))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| Error::config(format!("PostgresToolStore: {e}")))?;
        Ok(PostgresToolStore {
            pool,
            quoted_schema: format!("\"{}\"", options.schema),
            schema: options.schema,
            target,
            migrated: OnceCell::new(),
        })
    }

    /// The schema the specs live in (`schema`, `'corral'` by default).
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// An error of this store: what failed and where (host, port, database, user), with the
    /// causes the server or the network gave. Built from parts that hold no password (the
    /// driver's errors never carry it), never by searching a text for it and masking it.
    fn error(&self, what: &str, e: impl std::fmt::Display) -> Error {
        Error::new(Code::Io, format!("PostgresToolStore ({}): {what}: {e}", self.target))
    }

    /// A connection of the pool, the schema made and migrated first (once per store).
    async fn client(&self) -> Result<deadpool_postgres::Object> {
        // Migrated first, with a connection of its own given back before this call takes one:
        // calls that hold every connection of the pool never wait for a migration's.
        self.migrated
            .get_or_try_init(|| async {
                let mut client = self.pool.get().await.map_err(|e| self.error("cannot connect", causes(&e)))?;
                self.migrate(&mut client).await
            })
            .await?;
        self.pool.get().await.map_err(|e| self.error("cannot connect", causes(&e)))
    }

    /// Applies the migrations past the stored version in one transaction that holds corral's
    /// advisory lock: a second process waits, then finds the work done.
    async fn migrate(&self, client: &mut deadpool_postgres::Object) -> Result<()> {
        let s = &self.quoted_schema;
        let tx = client.transaction().await.map_err(|e| self.error("cannot migrate", causes(&e)))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(|e| self.error("cannot migrate", causes(&e)))?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {s}; CREATE TABLE IF NOT EXISTS {s}.schema_version (version INTEGER NOT NULL)"
        ))
        .await
        .map_err(|e| self.error("cannot migrate", causes(&e)))?;
        let row = tx
            .query_one(&format!("SELECT COALESCE(MAX(version), 0) FROM {s}.schema_version"), &[])
            .await
            .map_err(|e| self.error("cannot migrate", causes(&e)))?;
        let version: i32 = row.get(0);
        for (i, sql) in MIGRATIONS.iter().enumerate() {
            let v = i as i32 + 1;
            if v > version {
                tx.batch_execute(&sql.replace("{schema}", s))
                    .await
                    .map_err(|e| self.error("cannot migrate", causes(&e)))?;
                tx.execute(&format!("INSERT INTO {s}.schema_version (version) VALUES ($1)"), &[&v])
                    .await
                    .map_err(|e| self.error("cannot migrate", causes(&e)))?;
            }
        }
        tx.commit().await.map_err(|e| self.error("cannot migrate", causes(&e)))
    }

    /// Runs `f` with a connection, bounded by `CALL_TIMEOUT` altogether.
    async fn call<T>(
        &self,
        what: &str,
        f: impl for<'c> FnOnce(
            &'c deadpool_postgres::Object,
            &'c str,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>> + Send + 'c>,
        >,
    ) -> Result<T> {
        let run = async {
            let client = self.client().await?;
            match f(&client, &self.quoted_schema).await {
                Ok(v) => Ok(v),
                Err(e) => {
                    // A broken connection is not given back to the pool.
                    if e.is_closed() {
                        let _ = deadpool_postgres::Object::take(client);
                    }
                    Err(self.error(what, causes(&e)))
                }
            }
        };
        tokio::time::timeout(CALL_TIMEOUT, run)
            .await
            .unwrap_or_else(|_| Err(self.error(what, format!("no answer within {} s", CALL_TIMEOUT.as_secs()))))
    }

    /// The schema version the database is at.
    pub async fn version(&self) -> Result<i32> {
        self.call("cannot read the schema version", |c, s| {
            Box::pin(async move {
                c.query_one(&format!("SELECT MAX(version) FROM {s}.schema_version"), &[]).await.map(|r| r.get(0))
            })
        })
        .await
    }

    /// Ends every connection; a later call fails.
    pub fn close(&self) {
        self.pool.close();
    }
}

/// An error with its causes, each once: `a: b: c` (a pool's "db error" says little alone).
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = s.source();
    }
    parts.join(": ")
}

/// `host:port/database as user`, for messages.
fn target_of(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".to_string());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}/{} as {}", config.get_dbname().unwrap_or_default(), config.get_user().unwrap_or_default())
}

#[async_trait]
impl ToolStore for PostgresToolStore {
    async fn get(&self, workspace: &str, name: &str) -> Result<Option<Value>> {
        let (w, n) = (workspace.to_string(), name.to_string());
        let row = self
            .call("cannot read a tool", move |c, s| {
                Box::pin(async move {
                    c.query_opt(
                        &format!("SELECT spec FROM {s}.workspace_tools WHERE workspace_id = $1 AND name = $2"),
                        &[&w, &n],
                    )
                    .await
                })
            })
            .await?;
        Ok(row.map(|r| r.get::<_, Value>(0)))
    }

    async fn put(&self, workspace: &str, spec: &WorkspaceToolSpec) -> Result<()> {
        let (w, n, v) = (workspace.to_string(), spec.name.clone(), spec.to_json());
        self.call("cannot store a tool", move |c, s| {
            Box::pin(async move {
                c.execute(
                    &format!(
                        "INSERT INTO {s}.workspace_tools (workspace_id, name, spec, updated_at) VALUES ($1, $2, $3, now())
                         ON CONFLICT (workspace_id, name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at"
                    ),
                    &[&w, &n, &v],
                )
                .await
                .map(|_| ())
            })
        })
        .await
    }

    async fn delete(&self, workspace: &str, name: &str) -> Result<bool> {
        let (w, n) = (workspace.to_string(), name.to_string());
        self.call("cannot delete a tool", move |c, s| {
            Box::pin(async move {
                c.execute(&format!("DELETE FROM {s}.workspace_tools WHERE workspace_id = $1 AND name = $2"), &[&w, &n])
                    .await
                    .map(|n| n > 0)
            })
        })
        .await
    }

    async fn list(&self, workspace: &str) -> Result<Vec<Value>> {
        let w = workspace.to_string();
        let rows = self
            .call("cannot list tools", move |c, s| {
                Box::pin(async move {
                    c.query(
                        &format!(
                            "SELECT spec FROM {s}.workspace_tools WHERE workspace_id = $1 ORDER BY name COLLATE \"C\""
                        ),
                        &[&w],
                    )
                    .await
                })
            })
            .await?;
        Ok(rows.into_iter().map(|r| r.get::<_, Value>(0)).collect())
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn an_error_names_the_server_whole_even_when_the_password_is_a_letter_of_it() {
        let options = PostgresOptions::from_json(&serde_json::json!({
            "connectionString": "postgres://corral:a@127.0.0.1:1/corral"
        }))
        .unwrap();
        let store = PostgresToolStore::new(options).unwrap();
        let e = store.error("cannot connect", "refused");
        assert!(e.message.contains("corral") && !e.message.contains('*'), "{}", e.message);
    }
}
