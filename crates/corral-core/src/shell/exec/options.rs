//! The options of a directory that commands run in, and of the host environment they get.

use std::collections::BTreeMap;

use serde_json::Value;

use super::InheritEnv;
use crate::error::Result;
use crate::options::Reader;

impl InheritEnv {
    /// `inheritEnv`: `true` (everything), or a list of names.
    pub fn read(r: &Reader<'_>, key: &str) -> Result<InheritEnv> {
        match r.get(key) {
            None | Some(Value::Bool(false)) => Ok(InheritEnv::None),
            Some(Value::Bool(true)) => Ok(InheritEnv::All),
            Some(_) => r
                .strings(key)
                .map_err(|_| r.err(format!("{key} must be true or an array of variable names.")))
                .map(|names| InheritEnv::List(names.unwrap_or_default())),
        }
    }
}

/// The options of a directory that commands run in: `NodeWorkspace({ root, env?, inheritEnv? })`
/// and `SandboxShell(adapter, { cwd, env?, inheritEnv? })`.
pub struct DirOptions {
    /// `root` or `cwd`.
    pub dir: String,
    pub env: BTreeMap<String, String>,
    pub inherit: InheritEnv,
}

impl DirOptions {
    fn read(what: &'static str, v: &Value, key: &str, missing: &str) -> Result<DirOptions> {
        let r = Reader::new(what, v, &[key, "env", "inheritEnv"])?;
        let dir = r.string(key)?.ok_or_else(|| r.err(missing))?;
        Ok(DirOptions { dir, env: r.string_map("env")?, inherit: InheritEnv::read(&r, "inheritEnv")? })
    }

    pub fn node_workspace(v: &Value) -> Result<DirOptions> {
        DirOptions::read("NodeWorkspace", v, "root", "root must be a path to an existing directory.")
    }

    pub fn sandbox_shell(v: &Value) -> Result<DirOptions> {
        DirOptions::read("SandboxShell", v, "cwd", "cwd must be an absolute path.")
    }
}
