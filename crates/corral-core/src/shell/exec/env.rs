//! The environment a command gets: a minimal base of the host's variables, plus what the caller
//! names (`inheritEnv`) and gives (`env`).

use std::collections::BTreeMap;

/// Which host variables a command gets beyond the minimal base.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum InheritEnv {
    #[default]
    None,
    List(Vec<String>),
    /// The whole host environment.
    All,
}

const BASE_VARS: &[&str] = &["PATH", "HOME", "USERPROFILE", "TEMP", "TMP", "TMPDIR", "LANG", "TERM"];
/// What a Windows command needs to start and to know where it runs (`%OS%` included), and the
/// session variables Node's launcher adds to every process (the reference's commands see them);
/// none is a secret.
#[cfg(windows)]
const WINDOWS_VARS: &[&str] = &[
    "SystemRoot",
    "SystemDrive",
    "ComSpec",
    "PATHEXT",
    "WINDIR",
    "OS",
    "HOMEDRIVE",
    "HOMEPATH",
    "USERNAME",
    "USERDOMAIN",
    "LOGONSERVER",
];

/// Whether two variable names are the same (case-insensitively on Windows).
fn same_name(a: &str, b: &str) -> bool {
    if cfg!(windows) {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

pub(super) fn is_base_name(name: &str) -> bool {
    if BASE_VARS.iter().any(|v| same_name(v, name)) {
        return true;
    }
    let lc = if cfg!(windows) { name.to_ascii_uppercase().starts_with("LC_") } else { name.starts_with("LC_") };
    if lc {
        return true;
    }
    #[cfg(windows)]
    if WINDOWS_VARS.iter().any(|v| same_name(v, name)) {
        return true;
    }
    false
}

/// Sets a variable, replacing one of the same name (case-insensitively on Windows).
pub fn set_var(env: &mut BTreeMap<String, String>, name: &str, value: &str) {
    if cfg!(windows) {
        env.retain(|k, _| !k.eq_ignore_ascii_case(name));
    }
    env.insert(name.to_string(), value.to_string());
}

/// The host's variables (those whose name and value are Unicode).
fn host_vars() -> Vec<(String, String)> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect()
}

/// The environment every command starts from: PATH, HOME, USERPROFILE, TEMP, TMP, TMPDIR, LANG,
/// LC_* and TERM from the host (plus SystemRoot, SystemDrive, ComSpec, PATHEXT, WINDIR, OS and the
/// session variables HOMEDRIVE, HOMEPATH, USERNAME, USERDOMAIN and LOGONSERVER on Windows), then
/// the inherited names (or everything with `All`).
pub fn base_env(inherit: &InheritEnv) -> BTreeMap<String, String> {
    let host = host_vars();
    let mut env = BTreeMap::new();
    for (k, v) in &host {
        if is_base_name(k) {
            set_var(&mut env, k, v);
        }
    }
    match inherit {
        InheritEnv::None => {}
        InheritEnv::List(names) => {
            for name in names {
                if let Some((k, v)) = host.iter().find(|(k, _)| same_name(k, name)) {
                    set_var(&mut env, k, v);
                }
            }
        }
        InheritEnv::All => {
            for (k, v) in &host {
                set_var(&mut env, k, v);
            }
        }
    }
    env
}
