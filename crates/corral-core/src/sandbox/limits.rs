//! `limits` of LinuxSandbox and SubprocessSandbox: one shape, one check, one note.

use serde_json::Value;

use crate::error::Result;
use crate::options::Reader;
use crate::shell::ExecResult;

/// What a command may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub file_size_bytes: Option<u64>,
    pub open_files: Option<u64>,
}

impl Limits {
    /// `limits: { memoryBytes?, pids?, cpuSeconds?, fileSizeBytes?, openFiles? }`; zero, negative
    /// or absurd values are a `ConfigurationError` naming the option.
    pub fn from_option(v: Option<&Value>, what: &'static str) -> Result<Limits> {
        let Some(l) = v else { return Ok(Limits::default()) };
        let lr = Reader::new(what, l, &["memoryBytes", "pids", "cpuSeconds", "fileSizeBytes", "openFiles"])?;
        let opt = |k: &str, range: std::ops::RangeInclusive<u64>| -> Result<Option<u64>> {
            Ok(match lr.get(k) {
                None => None,
                Some(_) => Some(lr.int(k, 0, range)?),
            })
        };
        Ok(Limits {
            memory_bytes: opt("memoryBytes", (1 << 20)..=(1 << 50))?,
            pids: opt("pids", 1..=1_000_000)?,
            cpu_seconds: opt("cpuSeconds", 1..=31_536_000)?,
            file_size_bytes: opt("fileSizeBytes", 1..=(1 << 50))?,
            open_files: opt("openFiles", 8..=1_048_576)?,
        })
    }

    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }
}

/// What C libraries, runtimes and tools print when an allocation fails.
#[cfg(target_os = "linux")]
pub(crate) fn says_out_of_memory(stderr: &str) -> bool {
    let mut start = stderr.len().saturating_sub(4096);
    while !stderr.is_char_boundary(start) {
        start += 1;
    }
    let tail = stderr[start..].to_ascii_lowercase();
    ["memory exhausted", "cannot allocate memory", "out of memory", "bad_alloc", "memoryerror", "failed to allocate"]
        .iter()
        .any(|p| tail.contains(p))
}

/// The note for a command a limit stopped.
/// The hard limit beside a soft one: one more second for CPU time, so every process that spins
/// first gets `SIGXCPU` (whose death a shell reports as 152, whichever process it was) and only
/// one that survives it `SIGKILL`; the same value for the others.
pub(crate) fn hard_limit(cpu: bool, soft: u64) -> u64 {
    if cpu {
        soft.saturating_add(1)
    } else {
        soft
    }
}

/// The limit signal a POSIX shell reports as exit code `128 + n` for a child it killed. Windows
/// exit codes carry no signal.
fn shell_reported_signal(code: Option<i32>) -> Option<&'static str> {
    #[cfg(unix)]
    match code.map(|c| c - 128) {
        Some(libc::SIGXCPU) => return Some("SIGXCPU"),
        Some(libc::SIGXFSZ) => return Some("SIGXFSZ"),
        Some(libc::SIGKILL) => return Some("SIGKILL"),
        _ => {}
    }
    let _ = code;
    None
}

pub(crate) fn limit_note(
    r: &ExecResult,
    limits: &Limits,
    memory_hit: bool,
    per_process_memory: bool,
    pids_refused: u64,
) -> Option<String> {
    // The signal that stopped the command, or the one its shell reports (128 + n).
    let reported = shell_reported_signal(r.exit_code);
    let sig = r.signal.as_deref().or(reported.filter(|s| *s != "SIGKILL"));
    if memory_hit {
        return Some(format!(
            "The command ran out of its memory limit ({} bytes{}): memory.",
            limits.memory_bytes.unwrap_or(0),
            if per_process_memory { " per process" } else { "" }
        ));
    }
    // A process that survived SIGXCPU gets SIGKILL at the hard limit: as the command itself, or as
    // a child whose death its shell reports as 137.
    let killed = sig == Some("SIGKILL") || reported == Some("SIGKILL");
    if sig == Some("SIGXCPU") || (limits.cpu_seconds.is_some() && killed && !r.timed_out && !r.aborted) {
        return Some(format!("The command used up its CPU time ({} s): cpu.", limits.cpu_seconds.unwrap_or(0)));
    }
    // Where SIGXFSZ is ignored (a container runtime may leave it so), the write fails with EFBIG.
    let efbig = limits.file_size_bytes.is_some()
        && r.exit_code.is_some_and(|c| c != 0)
        && r.stderr.to_ascii_lowercase().contains("file too large");
    if sig == Some("SIGXFSZ") || efbig {
        return Some(format!(
            "The command wrote past its file size limit ({} bytes): file size.",
            limits.file_size_bytes.unwrap_or(0)
        ));
    }
    if pids_refused > 0 {
        return Some(format!(
            "The command tried to start more than {} processes and {pids_refused} forks were refused: pids.",
            limits.pids.unwrap_or(0)
        ));
    }
    // Where the refusals cannot be counted (a container), the shell's own words say it.
    let said = r.stderr.to_ascii_lowercase();
    if limits.pids.is_some()
        && ["can't fork", "cannot fork", "resource temporarily unavailable"].iter().any(|w| said.contains(w))
    {
        return Some(format!(
            "The command tried to start more than {} processes and forks were refused: pids.",
            limits.pids.unwrap_or(0)
        ));
    }
    None
}
