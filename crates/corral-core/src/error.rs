//! One error type for the whole core. The binding turns `Code::Configuration` into a JS
//! `ConfigurationError`, `Code::EgressUnsupported` into an error whose `code` is the documented
//! `LOUSHO_SANDBOX_EGRESS_UNSUPPORTED`, and every other code into a `WorkspaceError`.

use std::fmt;

/// The codes, with the name each has in JavaScript (`as_str`): derived, so the list, the names
/// and `parse` cannot drift apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
pub enum Code {
    NotFound,
    OutsideWorkspace,
    Denied,
    NotAFile,
    IsADirectory,
    TooLarge,
    NotUtf8,
    NoMatch,
    Ambiguous,
    InvalidPattern,
    InvalidArguments,
    Timeout,
    Aborted,
    CommandRefused,
    ReadOnly,
    /// A `protect` glob refused a write.
    Protected,
    /// The target of a move or a new directory is already there.
    Exists,
    /// `requireRead`: the session has not read the file it would change.
    NotRead,
    /// `requireRead`: the file changed since the session last read it.
    Stale,
    /// `apply_patch`: the patch does not follow the envelope's grammar.
    InvalidPatch,
    /// `apply_patch`: lines or an anchor of the patch are not in the file.
    PatchMismatch,
    /// An I/O failure that is none of the above (a full disk, a permission the OS refused).
    Io,
    /// Bad options or a bad root: a `ConfigurationError` in JS.
    #[strum(serialize = "ConfigurationError")]
    Configuration,
    /// `LOUSHO_SANDBOX_EGRESS_UNSUPPORTED`: allowlisted egress cannot be enforced here.
    #[strum(serialize = "LOUSHO_SANDBOX_EGRESS_UNSUPPORTED")]
    EgressUnsupported,
    /// An error thrown by JavaScript code (a provider, a stub, a callback) that is not a
    /// `WorkspaceError`: carried through the core and rethrown as it was, never shown to a model.
    #[strum(serialize = "ForeignError")]
    Foreign,
}

impl Code {
    /// The codes a `WorkspaceError` carries (the others become a `ConfigurationError`, the
    /// documented egress error, or the caller's own error).
    pub fn is_workspace_error(self) -> bool {
        self.kind() == "workspace"
    }

    /// Every code.
    pub const ALL: &'static [Code] = <Code as strum::VariantArray>::VARIANTS;

    /// The code a string names (`as_str`'s inverse).
    pub fn parse(s: &str) -> Option<Code> {
        s.parse().ok()
    }

    /// The code's name in JavaScript: the variant's, but for the three named above.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The JavaScript error a code becomes: `workspace` (a `WorkspaceError`), `configuration`
    /// (a `ConfigurationError`), `egress` (the documented egress error) or `foreign` (the caller's
    /// own error, rethrown as it was).
    pub fn kind(self) -> &'static str {
        match self {
            Code::Configuration => "configuration",
            Code::EgressUnsupported => "egress",
            Code::Foreign => "foreign",
            _ => "workspace",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: Code,
    pub message: String,
    /// With `Code::Foreign`: the error as the caller's code threw it (the binding keeps the
    /// original JavaScript error here), so it is rethrown as it was, never shown to a model.
    pub foreign: Option<Foreign>,
}

/// An error value of the caller's, opaque to the core.
#[derive(Clone)]
pub struct Foreign(pub std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl fmt::Debug for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Foreign(..)")
    }
}

impl PartialEq for Foreign {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Foreign {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error { code, message: message.into(), foreign: None }
    }
    /// An error the caller's code threw, kept as it was.
    pub fn foreign(message: impl Into<String>, value: std::sync::Arc<dyn std::any::Any + Send + Sync>) -> Self {
        Error { code: Code::Foreign, message: message.into(), foreign: Some(Foreign(value)) }
    }
    pub fn config(message: impl Into<String>) -> Self {
        Error::new(Code::Configuration, message)
    }
    pub fn not_found(path: &str) -> Self {
        Error::new(Code::NotFound, format!("File not found: {path}"))
    }
    pub fn aborted() -> Self {
        Error::new(Code::Aborted, "The operation was aborted.")
    }
    /// Turns an OS error into a workspace error that names the workspace path, never the host path.
    pub fn io(path: &str, err: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        match err.kind() {
            K::NotFound => Error::not_found(path),
            K::PermissionDenied => Error::new(Code::ReadOnly, format!("Permission denied: {path}")),
            K::IsADirectory => Error::new(Code::IsADirectory, format!("Is a directory: {path}")),
            K::NotADirectory => Error::new(Code::NotFound, format!("Not a directory on the way to: {path}")),
            _ => {
                let text = match err.raw_os_error() {
                    Some(_) => err.kind().to_string(),
                    None => err.to_string(),
                };
                Error::new(Code::Io, format!("{text}: {path}"))
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_d_ts_declares_exactly_the_workspace_error_codes_of_the_core() {
        let dts = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../index.d.ts"));
        let start = dts.find("export type WorkspaceErrorCode =").expect("the union is declared");
        let decl = &dts[start..start + dts[start..].find(';').unwrap()];
        let mut declared: Vec<&str> = decl.split('\'').skip(1).step_by(2).collect();
        declared.sort();
        let mut core: Vec<&str> = Code::ALL.iter().filter(|c| c.is_workspace_error()).map(|c| c.as_str()).collect();
        core.sort();
        assert_eq!(declared, core);
        assert!(dts.contains("code: 'LOUSHO_SANDBOX_EGRESS_UNSUPPORTED'"));
        assert!(dts.contains("readonly code: 'ConfigurationError'"));
    }

    #[test]
    fn every_code_reads_back_from_its_name() {
        for &c in Code::ALL {
            assert_eq!(Code::parse(c.as_str()), Some(c));
        }
    }
}
