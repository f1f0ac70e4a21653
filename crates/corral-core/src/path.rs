//! Workspace path rules: normalization (posix and win32 rules), deny names, and the `.git` rules.
//!
//! A workspace path is relative, uses `/`, has no `.` or `..` segments and never names the root's
//! parent. The root itself is `"."`.

use crate::error::{Code, Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Posix,
    Win32,
    /// Both rule sets: what `normalizeWorkspacePath(path)` applies with no flavor.
    Both,
}

impl Flavor {
    /// The rules of the platform corral runs on.
    pub fn native() -> Flavor {
        if cfg!(windows) {
            Flavor::Win32
        } else {
            Flavor::Posix
        }
    }
    /// `normalizeWorkspacePath`'s `flavor`: `'posix'`, `'win32'`, or both when not given.
    pub fn from_option(v: Option<&str>) -> Result<Flavor> {
        match v {
            None => Ok(Flavor::Both),
            Some(s) => Flavor::parse(s).ok_or_else(|| {
                Error::config(format!("normalizeWorkspacePath: flavor must be 'posix' or 'win32', got '{s}'."))
            }),
        }
    }
    pub fn parse(s: &str) -> Option<Flavor> {
        match s {
            "posix" => Some(Flavor::Posix),
            "win32" => Some(Flavor::Win32),
            _ => None,
        }
    }
    fn windows_rules(self) -> bool {
        matches!(self, Flavor::Win32 | Flavor::Both)
    }
}

fn outside(path: &str, why: &str) -> Error {
    Error::new(Code::OutsideWorkspace, format!("Path is outside the workspace: {} ({why})", shown(path)))
}

/// A path as it may appear in a message: control characters (NUL among them) made visible.
pub fn shown(path: &str) -> String {
    path.chars().map(|c| if c.is_control() { char::REPLACEMENT_CHARACTER } else { c }).collect()
}

fn is_reserved_device(seg: &str) -> bool {
    // CON, PRN, AUX, NUL, COM0-9, LPT0-9 (and the superscript digits Windows also treats as
    // devices), with or without an extension, trailing dots and spaces ignored.
    let base = seg.split('.').next().unwrap_or("").trim_end_matches([' ', '.']);
    let upper = base.to_ascii_uppercase();
    let u = upper.as_str();
    if matches!(u, "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$") {
        return true;
    }
    for prefix in ["COM", "LPT"] {
        if let Some(rest) = upper.strip_prefix(prefix) {
            let rest: Vec<char> = rest.chars().collect();
            if rest.len() == 1 && (rest[0].is_ascii_digit() || matches!(rest[0], '¹' | '²' | '³')) {
                return true;
            }
        }
    }
    false
}

/// The longest path accepted, in bytes (Linux's PATH_MAX).
pub const MAX_PATH_BYTES: usize = 4096;
/// The longest segment accepted, in bytes (the common NAME_MAX).
pub const MAX_SEGMENT_BYTES: usize = 255;
/// The most segments a path may have.
pub const MAX_DEPTH: usize = 256;

fn too_long(path: &str, why: String) -> Error {
    let head: String = shown(path).chars().take(60).collect();
    Error::new(Code::InvalidArguments, format!("Path is refused: {head}… ({why})"))
}

/// Normalizes a workspace path, or explains why it is refused.
pub fn normalize(path: &str, flavor: Flavor) -> Result<String> {
    // Bounds first, before any work that grows with the path.
    if path.len() > MAX_PATH_BYTES {
        return Err(too_long(path, format!("it is {} bytes long; the limit is {MAX_PATH_BYTES}", path.len())));
    }
    if let Some(seg) = path.split(['/', '\\']).find(|s| s.len() > MAX_SEGMENT_BYTES) {
        return Err(too_long(path, format!("a segment is {} bytes long; the limit is {MAX_SEGMENT_BYTES}", seg.len())));
    }
    if path.split(['/', '\\']).filter(|s| !s.is_empty() && *s != ".").count() > MAX_DEPTH {
        return Err(too_long(path, format!("it has more than {MAX_DEPTH} segments")));
    }
    if path.contains('\0') {
        return Err(outside(path, "it contains a NUL byte"));
    }
    let unified = path.replace('\\', "/");
    if unified.starts_with('/') {
        return Err(if unified.starts_with("//") {
            outside(path, "UNC and extended-length paths are not allowed")
        } else {
            outside(path, "absolute paths are not allowed; use a path relative to the workspace root")
        });
    }
    let bytes = unified.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(outside(path, "drive letters are not allowed"));
    }
    let mut out: Vec<&str> = Vec::new();
    for seg in unified.split('/') {
        if seg.is_empty() || seg == "." {
            continue;
        }
        if flavor.windows_rules() {
            if seg != ".." && seg.chars().all(|c| c == '.' || c == ' ') {
                return Err(outside(path, "a segment made only of dots and spaces acts as '..' on Windows"));
            }
            if seg.contains(':') {
                return Err(Error::new(
                    Code::OutsideWorkspace,
                    format!("Path is not allowed: {} (':' names an alternate data stream on Windows)", shown(path)),
                ));
            }
            if is_reserved_device(seg) {
                return Err(Error::new(
                    Code::OutsideWorkspace,
                    format!("Path is not allowed: {} ('{seg}' is a reserved device name on Windows)", shown(path)),
                ));
            }
        }
        if seg == ".." {
            if out.pop().is_none() {
                return Err(outside(path, "'..' climbs above the workspace root"));
            }
            continue;
        }
        out.push(seg);
    }
    if out.is_empty() {
        return Ok(".".to_string());
    }
    // `./C:x` would come out as `C:x`: a drive-relative path on Windows.
    let first = out[0].as_bytes();
    if first.len() >= 2 && first[0].is_ascii_alphabetic() && first[1] == b':' {
        return Err(outside(path, "drive letters are not allowed"));
    }
    Ok(out.join("/"))
}

/// Where an SDK sandbox session shows the workspace when its options name no `root`.
pub const DEFAULT_SANDBOX_ROOT: &str = "/workspace";

/// A session's `root` option (`None`: [`DEFAULT_SANDBOX_ROOT`]), checked: an absolute path.
pub fn sandbox_root(root: Option<&str>) -> Result<String> {
    let root = root.unwrap_or(DEFAULT_SANDBOX_ROOT);
    from_sandbox(root, ".")?;
    Ok(root.to_string())
}

/// A path an SDK's sandbox session was given (AI SDK, OpenAI Agents) as a workspace path. The
/// session shows the workspace to the model as the absolute directory `root` (`/workspace`):
/// a path under it is the workspace path after it; a relative path is the workspace's own; any
/// other absolute path is outside. The provider confines the result like any path (`..`).
pub fn from_sandbox(root: &str, path: &str) -> Result<String> {
    if !root.starts_with('/') || root.contains(['\\', '\0']) || root.split('/').any(|s| s == "." || s == "..") {
        return Err(Error::config(format!(
            "root must be an absolute POSIX path such as /workspace (the workspace's name in the sandbox), not {root:?}."
        )));
    }
    let root = root.trim_end_matches('/');
    let unified = path.replace('\\', "/");
    let absolute = unified.starts_with('/')
        || (unified.len() >= 2 && unified.as_bytes()[0].is_ascii_alphabetic() && unified.as_bytes()[1] == b':');
    if !absolute {
        return Ok(path.to_string());
    }
    match unified.strip_prefix(root) {
        Some("") | Some("/") => Ok(".".to_string()),
        Some(rest) if rest.starts_with('/') => Ok(rest.trim_start_matches('/').to_string()),
        _ => Err(Error::new(
            Code::OutsideWorkspace,
            format!(
                "Path is outside the workspace: {} (only paths under {} name workspace files)",
                shown(path),
                if root.is_empty() { "/" } else { root }
            ),
        )),
    }
}

/// `from_sandbox`, where commands see the workspace at its real directory (`host_root`, a
/// NodeWorkspace's): a path under that directory, copied from a command's output, names the same
/// workspace file.
pub fn from_sandbox_or_host(root: &str, host_root: Option<&str>, path: &str) -> Result<String> {
    match from_sandbox(root, path) {
        Err(e) if e.code == Code::OutsideWorkspace => host_root.and_then(|h| under_host(h, path)).ok_or(e),
        other => other,
    }
}

/// The workspace path of absolute `path` when it lies under `host` (the workspace's real
/// directory as the host writes it), else `None`. A Windows directory (`C:\dir`, or its verbatim
/// `\\?\C:\dir`) is compared name by name as Windows compares them, case folded, with either
/// separator; the provider confines the result like any path.
fn under_host(host: &str, path: &str) -> Option<String> {
    if host.starts_with('/') {
        return from_sandbox(host, path).ok();
    }
    let unify = |p: &str| {
        let p = p.replace('\\', "/");
        p.strip_prefix("//?/").map_or(p.clone(), str::to_string)
    };
    let (host, path) = (unify(host), unify(path));
    let drive = |p: &str| p.len() >= 2 && p.as_bytes()[0].is_ascii_alphabetic() && p.as_bytes()[1] == b':';
    if !drive(&host) || !drive(&path) || host.contains('\0') {
        return None;
    }
    let names = |p: &str| p.split('/').filter(|s| !s.is_empty()).map(str::to_string).collect::<Vec<_>>();
    let (host, path) = (names(&host), names(&path));
    let same = |a: &String, b: &String| a.to_lowercase() == b.to_lowercase();
    if path.len() < host.len() || !host.iter().zip(&path).all(|(a, b)| same(a, b)) {
        return None;
    }
    let rest = path[host.len()..].join("/");
    Some(if rest.is_empty() { ".".to_string() } else { rest })
}

/// The name as Windows compares it: trailing dots and spaces dropped, case folded.
fn fold(name: &str) -> String {
    name.trim_end_matches(['.', ' ']).to_lowercase()
}

/// The 8.3 short-name stem Windows generates for a long name (`.git` -> `GIT`).
fn short_stem(name: &str) -> String {
    let base = fold(name);
    let stem: String = match base.rfind('.') {
        Some(i) if i > 0 => base[..i].to_string(),
        _ => base.clone(),
    };
    stem.chars().filter(|c| *c != '.' && *c != ' ').take(6).collect::<String>().to_uppercase()
}

/// Whether an entry name is blocked by a deny list (compared case-insensitively, trailing dots
/// and spaces ignored, 8.3 short names such as `GIT~1` included).
pub fn name_is_denied(name: &str, deny: &[String]) -> bool {
    if deny.is_empty() {
        return false;
    }
    // Asked of every entry a walk meets: ASCII names (nearly all) are compared without a copy,
    // and only a name with a `~` can be a short name.
    let trimmed = name.trim_end_matches(['.', ' ']);
    let ascii = trimmed.is_ascii();
    let tilde = name.contains('~');
    let mut folded: Option<String> = None;
    let mut upper: Option<String> = None;
    deny.iter().any(|d| {
        let d_trimmed = d.trim_end_matches(['.', ' ']);
        let same = if ascii && d_trimmed.is_ascii() {
            trimmed.eq_ignore_ascii_case(d_trimmed)
        } else {
            *folded.get_or_insert_with(|| fold(name)) == fold(d)
        };
        if same {
            return true;
        }
        if !tilde {
            return false;
        }
        let upper = upper.get_or_insert_with(|| name.to_uppercase());
        // An 8.3 short name: STEM~N, optionally with an extension.
        let stem = short_stem(d);
        if stem.is_empty() || stem.len() == fold(d).len() && !d.starts_with('.') {
            return false;
        }
        if let Some(rest) = upper.strip_prefix(&stem) {
            if let Some(num) = rest.strip_prefix('~') {
                let digits: String = num.chars().take_while(|c| c.is_ascii_digit()).collect();
                return !digits.is_empty() && (num.len() == digits.len() || num[digits.len()..].starts_with('.'));
            }
        }
        false
    })
}

/// Refuses a normalized path with a denied segment at any depth.
pub fn check_denied(path: &str, deny: &[String]) -> Result<()> {
    if path == "." {
        return Ok(());
    }
    for seg in path.split('/') {
        if name_is_denied(seg, deny) {
            return Err(Error::new(
                Code::Denied,
                format!("Access denied: {path} ('{seg}' is a denied name; the file tools never touch it)"),
            ));
        }
    }
    Ok(())
}

/// The default deny list of the file tools.
pub fn default_deny() -> Vec<String> {
    vec![".git".to_string()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn sandbox_paths_under_the_root_are_workspace_paths_and_other_absolute_paths_are_outside() {
        assert_eq!(from_sandbox("/workspace", "src/a.js").unwrap(), "src/a.js");
        assert_eq!(from_sandbox("/workspace", "/workspace/src/a.js").unwrap(), "src/a.js");
        assert_eq!(from_sandbox("/workspace/", "/workspace//a").unwrap(), "a");
        assert_eq!(from_sandbox("/workspace", "/workspace").unwrap(), ".");
        assert_eq!(from_sandbox("/workspace", "/workspace/").unwrap(), ".");
        // The root's name is a whole segment: /workspace2 is not under /workspace.
        for outside in ["/workspace2/a", "/etc/passwd", "C:/x", "\\\\server\\share", "/"] {
            let e = from_sandbox("/workspace", outside).unwrap_err();
            assert_eq!(e.code, Code::OutsideWorkspace, "{outside}");
        }
        // `..` after the root is left to the provider, which refuses it.
        assert_eq!(from_sandbox("/workspace", "/workspace/../etc").unwrap(), "../etc");
        assert!(normalize(&from_sandbox("/workspace", "/workspace/../etc").unwrap(), Flavor::Both).is_err());
        assert_eq!(from_sandbox("/", "/a/b").unwrap(), "a/b");
        // The host's directory of the workspace names it too, where it is given.
        assert_eq!(from_sandbox_or_host("/workspace", Some("/srv/ws"), "/srv/ws/a").unwrap(), "a");
        assert_eq!(from_sandbox_or_host("/workspace", Some("/srv/ws"), "/workspace/a").unwrap(), "a");
        assert_eq!(
            from_sandbox_or_host("/workspace", Some("/srv/ws"), "/srv/wsx").unwrap_err().code,
            Code::OutsideWorkspace
        );
        // A Windows directory, as Windows compares names: either separator, any case, verbatim.
        for (host, path, want) in [
            ("C:\\ws", "C:\\ws\\a", "a"),
            ("C:\\ws", "c:/WS/sub/b.txt", "sub/b.txt"),
            ("\\\\?\\C:\\Users\\r\\ws", "C:\\users\\R\\ws\\a", "a"),
            ("C:\\ws\\", "C:\\ws", "."),
            ("C:\\ws", "C:\\ws\\..\\x", "../x"),
        ] {
            assert_eq!(from_sandbox_or_host("/workspace", Some(host), path).unwrap(), want, "{host} {path}");
        }
        for (host, path) in
            [("C:\\ws", "C:\\ws2\\a"), ("C:\\ws", "D:\\ws\\a"), ("C:\\ws", "C:\\w"), ("ws", "C:\\ws\\a")]
        {
            assert_eq!(
                from_sandbox_or_host("/workspace", Some(host), path).unwrap_err().code,
                Code::OutsideWorkspace,
                "{host} {path}"
            );
        }
        for bad in ["workspace", "", "/a/../b", "C:\\w"] {
            assert_eq!(from_sandbox(bad, "a").unwrap_err().code, Code::Configuration, "{bad}");
        }
    }

    use super::*;

    fn ok(p: &str, f: Flavor) -> String {
        normalize(p, f).unwrap_or_else(|e| panic!("{p:?} refused: {}", e.message))
    }
    fn bad(p: &str, f: Flavor) -> Error {
        normalize(p, f).expect_err(&format!("{p:?} should be refused"))
    }

    #[test]
    fn normalizes_ordinary_paths() {
        assert_eq!(ok("src/main.rs", Flavor::Posix), "src/main.rs");
        assert_eq!(ok("./src//a/../b.txt", Flavor::Posix), "src/b.txt");
        assert_eq!(ok("src\\lib.rs", Flavor::Posix), "src/lib.rs");
        assert_eq!(ok("", Flavor::Posix), ".");
        assert_eq!(ok(".", Flavor::Both), ".");
        assert_eq!(ok("a/b/", Flavor::Both), "a/b");
        assert_eq!(ok("a/..", Flavor::Both), ".");
    }

    #[test]
    fn refuses_every_escape_on_every_flavor() {
        for f in [Flavor::Posix, Flavor::Win32, Flavor::Both] {
            for p in [
                "../secret",
                "src/../../secret",
                "/etc/passwd",
                "C:\\Windows",
                "C:secret",
                "c:/x",
                "\\\\server\\share",
                "//server/share",
                "\\\\?\\C:\\",
                "src/..\\..\\secret",
                "a\0b",
                "..",
                ".\\a:",
                "./c:/x",
            ] {
                assert_eq!(bad(p, f).code, Code::OutsideWorkspace, "{p}");
            }
        }
    }

    #[test]
    fn windows_rules_apply_to_win32_only() {
        for p in ["file.txt:stream", "CON", "nul.txt", "COM1", "lpt9.log", "a/.. ", "...", ". ", "aux ."] {
            assert!(normalize(p, Flavor::Win32).is_err(), "{p}");
            assert!(normalize(p, Flavor::Both).is_err(), "{p}");
        }
        assert_eq!(ok("file.txt:stream", Flavor::Posix), "file.txt:stream");
        assert_eq!(ok("CON", Flavor::Posix), "CON");
        assert_eq!(ok("console.txt", Flavor::Win32), "console.txt");
        assert_eq!(ok("com10", Flavor::Win32), "com10");
    }

    #[test]
    fn git_names() {
        let deny = default_deny();
        for name in [".git", ".GIT", ".git.", ".git ", ".Git. .", "GIT~1", "git~2"] {
            assert!(name_is_denied(name, &deny), "{name}");
        }
        for name in [".gitignore", ".github", "git", ".gitattributes", "GIT~", "GIT~X", "legit"] {
            assert!(!name_is_denied(name, &deny), "{name}");
        }
        // Folding is Unicode's: a Kelvin sign lowercases to an ASCII k, either way round.
        assert!(name_is_denied("KEY", &["\u{212A}ey".to_string()]));
        assert!(name_is_denied("\u{212A}EY", &["key".to_string()]));
        assert!(name_is_denied("Ünï", &["üNÏ".to_string()]));
        assert!(check_denied("sub/.git/config", &deny).is_err());
        assert!(check_denied(&ok(".git\\config", Flavor::Posix), &deny).is_err());
        assert!(check_denied(&ok("a/../.git/", Flavor::Posix), &deny).is_err());
        assert!(check_denied(".github/workflows/ci.yml", &deny).is_ok());
        assert!(check_denied(".git/config", &[]).is_ok());
        let more = vec![".git".to_string(), ".env".to_string(), "secrets".to_string()];
        assert!(check_denied("app/.env", &more).is_err());
        assert!(check_denied("config/Secrets/key", &more).is_err());
        assert!(check_denied("app/.env.example", &more).is_ok());
    }

    #[test]
    fn paths_too_long_too_deep_or_with_a_segment_over_255_bytes_are_invalid_arguments() {
        for p in ["y/".repeat(60_000) + "g", "a".repeat(4097), format!("d/{}", "n".repeat(256)), "a/".repeat(257)] {
            for f in [Flavor::Posix, Flavor::Win32, Flavor::Both] {
                assert_eq!(bad(&p, f).code, Code::InvalidArguments, "{}", &p[..20]);
            }
        }
        assert_eq!(ok(&"a/".repeat(256), Flavor::Posix).len(), 511);
        assert_eq!(ok(&"n".repeat(255), Flavor::Posix).len(), 255);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4000))]
            #[test]
            fn never_escapes(s in "[a-zA-Z./\\\\:\0 ~?*-]{0,24}") {
                for f in [Flavor::Posix, Flavor::Win32, Flavor::Both] {
                    if let Ok(p) = normalize(&s, f) {
                        prop_assert!(!p.contains('\0'));
                        prop_assert!(!p.starts_with('/'));
                        prop_assert!(!p.contains('\\'));
                        prop_assert!(p == "." || p.split('/').all(|seg| seg != ".." && seg != "." && !seg.is_empty()));
                        let b = p.as_bytes();
                        prop_assert!(!(b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'));
                        // Normalizing twice changes nothing.
                        prop_assert_eq!(normalize(&p, f).unwrap(), p.clone());
                    }
                }
            }
        }
    }
}
