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

/// `SandboxShell`'s `changesDir` and `applyChanges: 'manual'`.
pub struct ChangeOptions {
    pub dir: Option<String>,
    pub manual: bool,
}

impl DirOptions {
    fn read<'v>(
        what: &'static str,
        v: &'v Value,
        key: &str,
        missing: &str,
        more: &[&str],
    ) -> Result<(DirOptions, Reader<'v>)> {
        let known: Vec<&str> = [key, "env", "inheritEnv"].iter().chain(more).copied().collect();
        let r = Reader::new(what, v, &known)?;
        let dir = r.string(key)?.ok_or_else(|| r.err(missing))?;
        let o = DirOptions { dir, env: r.string_map("env")?, inherit: InheritEnv::read(&r, "inheritEnv")? };
        Ok((o, r))
    }

    pub fn node_workspace(v: &Value) -> Result<DirOptions> {
        DirOptions::read("NodeWorkspace", v, "root", "root must be a path to an existing directory.", &[])
            .map(|(o, _)| o)
    }

    /// `SandboxShell(adapter, { cwd, env?, inheritEnv?, checkpoints?, applyChanges?, changesDir? })`:
    /// the directory options, and what becomes of commands' changes (the checkpoints handle
    /// travels beside the options).
    pub fn sandbox_shell(v: &Value) -> Result<(DirOptions, ChangeOptions)> {
        let (o, r) = DirOptions::read(
            "SandboxShell",
            v,
            "cwd",
            "cwd must be an absolute path.",
            &["checkpoints", "applyChanges", "changesDir"],
        )?;
        let manual = match r.get("applyChanges") {
            None => false,
            Some(Value::String(s)) if s == "auto" => false,
            Some(Value::String(s)) if s == "manual" => true,
            Some(_) => return Err(r.err("applyChanges must be 'auto' or 'manual'.")),
        };
        Ok((o, ChangeOptions { dir: r.string("changesDir")?, manual }))
    }
}
