//! `KubernetesWorkspace`: the pod's `workdir` as an `FsProvider`, every operation one exec of a
//! fixed script with the paths as its arguments (never as shell text). The script resolves each
//! path in the pod (links followed by `readlink -f`) and refuses one whose real place is outside
//! `workdir` or goes through a denied name (`.git`); bytes cross as base64; a write goes to a
//! temporary file beside its target and is renamed over it.
//!
//! What this confines is the file tools, not the pod: a command in the same pod can reach what
//! its user can, and a link a command swaps between the script's check and its use is not
//! guarded against (the pod is the sandbox).

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;

use super::exec::Stdin;
use super::Shared;
use crate::error::{Code, Error, Result};
use crate::fs::{Caps, DirEntry, EntryType, FsProvider, Stat};
use crate::path::{check_denied, default_deny, normalize, Flavor};

/// The most base64 one read may bring back (a file of about 192 MiB).
const MAX_READ_BASE64: usize = 256 << 20;
/// The longest one operation may take (an API server that never answers is not waited on forever).
const OP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// `sh -c SCRIPT corral-fs <op> <workdir> <path> [arg]`. `realpath` of a path that does not
/// exist resolves its deepest existing part and adds the rest, as NodeWorkspace's does. Exit codes: 10 not found, 11 a
/// directory where a file was wanted, 12 not a directory / not a file, 13 outside `workdir`,
/// 16 a directory not empty, 17 a denied name, 18 a read-only file, 20 `workdir` missing. A write
/// is told the length of its base64 and of the bytes: it reads exactly that much (stdin is never
/// closed, which a v4 server could only do by closing the connection) and replaces nothing
/// unless the bytes it decoded are all there.
const SCRIPT: &str = r#"
op=$1; root=$2; rel=$3; arg=$4
R=$(cd -P -- "$root" 2>/dev/null && pwd -P && echo x) || { printf 'workdir %s does not exist in the pod\n' "$root" >&2; exit 20; }
R=${R%??}
if [ "$rel" = . ]; then p=$R; else p=${R%/}/$rel; fi
inside() { case $R in /) ;; *) case $1 in "$R"|"$R"/*) ;; *) exit 13;; esac;; esac
  l=$(printf '%s/' "${1#"${R%/}"}" | tr 'A-Z' 'a-z'); case $l in */.git/*) exit 17;; esac; }
exists() { [ -e "$1" ] || [ -L "$1" ]; }
real() { exists "$1" || exit 10; r=$(readlink -f -- "$1" && echo x) || exit 10; r=${r%??}; inside "$r"; exists "$r" || exit 10; }
up() { q=${1%/*}; q=${q:-/}; }
ancestor() { q=$1; while ! exists "$q"; do up "$q"; done; a=$(readlink -f -- "$q" && echo x) || exit 13; inside "${a%??}"; }
case $op in
read) real "$p"; [ -d "$r" ] && exit 11; [ -f "$r" ] || exit 12; base64 < "$r" ;;
stat) exists "$p" || exit 10; real "$p"; stat -c '%f %s %Y' -- "$r" ;;
readdir) real "$p"; [ -d "$r" ] || exit 12; cd -- "$r" || exit 1
  for f in * .[!.]* ..?*; do exists "$f" || continue
    if [ -L "$f" ]; then t=l; elif [ -d "$f" ]; then t=d; elif [ -f "$f" ]; then t=f; else t=o; fi
    printf '%s/%s\0' "$t" "$f"; done ;;
write) n=${arg% *}; size=${arg#* }; up "$p"; d=$q; ancestor "$d"; mkdir -p -- "$d" || exit 1; real "$d"; [ -d "$r" ] || exit 12; dr=${r%/}
  if exists "$p"; then real "$p"; [ -d "$r" ] && exit 11; [ -f "$r" ] || exit 12
    m=$(stat -c %a -- "$r") || exit 1; [ $(( 0$m & 0222 )) -ne 0 ] || exit 18
  else r=$dr/${p##*/}; inside "$r"; m=$(printf '%o' $(( 0666 & ~0$(umask) ))); fi
  t=$(mktemp "${r%/*}/.corral-write-XXXXXX") || exit 1
  if head -c "$n" | base64 -d > "$t" && [ "$(stat -c %s -- "$t")" = "$size" ] && chmod "$m" "$t" && mv -f -- "$t" "$r"; then :; else rm -f -- "$t"; exit 1; fi ;;
mkdir) ancestor "$p"; if exists "$p" && [ ! -d "$p" ]; then exit 12; fi; mkdir -p -- "$p" || exit 1; real "$p" ;;
rm) up "$p"; real "$q"; t=${r%/}/${p##*/}; inside "$t"; exists "$t" || exit 10
  if [ -d "$t" ] && [ ! -L "$t" ]; then if [ "$arg" = r ]; then rm -rf -- "$t" || exit 1; else rmdir -- "$t" 2>/dev/null || exit 16; fi
  else rm -f -- "$t" || exit 1; fi ;;
mode) real "$p"; stat -c %a -- "$r" ;;
chmod) real "$p"; chmod "$arg" "$r" ;;
realpath) q=$p; tail=; while ! exists "$q"; do tail=/${q##*/}$tail; up "$q"; done
  real "$q"; r=${r%/}$tail; inside "$r"; printf '%s' "${r#"${R%/}"}" ;;
*) exit 2 ;;
esac
"#;

/// `sandbox.workspace()`.
#[derive(Clone)]
pub struct KubernetesWorkspace {
    shared: Arc<Shared>,
    deny: Vec<String>,
}

impl KubernetesWorkspace {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        KubernetesWorkspace { shared, deny: default_deny() }
    }

    /// The pod directory the workspace is.
    pub fn workdir(&self) -> &str {
        &self.shared.options.workdir
    }

    fn norm(&self, path: &str) -> Result<String> {
        let rel = normalize(path, Flavor::Posix)?;
        check_denied(&rel, &self.deny)?;
        Ok(rel)
    }

    /// Runs one operation; its stdout, or the error its exit code means.
    async fn op(&self, op: &str, rel: &str, arg: &str, stdin: Stdin) -> Result<Vec<u8>> {
        let pod = self.shared.pod().await?;
        let argv = ["sh", "-c", SCRIPT, "corral-fs", op, self.workdir(), rel, arg].map(str::to_string).to_vec();
        let collected =
            tokio::time::timeout(OP_TIMEOUT, pod.collect(argv, stdin, MAX_READ_BASE64)).await.map_err(|_| {
                Error::new(
                    Code::Timeout,
                    format!(
                        "KubernetesWorkspace: {op} {rel} had no answer from the pod in {} s.",
                        OP_TIMEOUT.as_secs()
                    ),
                )
            })?;
        let (code, out, err) = match collected {
            Ok(c) => c,
            Err(e) => return Err(self.shared.check(&pod, e).await),
        };
        let err_text = || String::from_utf8_lossy(&err).trim().to_string();
        Err(match code {
            0 => return Ok(out),
            10 => Error::not_found(rel),
            11 => Error::new(Code::IsADirectory, format!("Is a directory: {rel}")),
            12 if op == "readdir" || op == "write" || op == "mkdir" => {
                Error::new(Code::NotAFile, format!("Not a directory: {rel}"))
            }
            12 => Error::new(Code::NotAFile, format!("Not a file: {rel}")),
            13 => Error::new(
                Code::OutsideWorkspace,
                format!("Path is not allowed: {rel} (it leads outside the workspace)"),
            ),
            16 => Error::new(Code::IsADirectory, format!("Directory not empty: {rel}")),
            17 => Error::new(Code::Denied, format!("Access denied: {rel} (it leads through a denied name)")),
            18 => Error::new(Code::ReadOnly, format!("File is read-only: {rel}")),
            20 => Error::config(format!("KubernetesWorkspace: {}", err_text())),
            _ => Error::new(
                Code::Io,
                format!("KubernetesWorkspace: {op} {rel} failed in the pod (exit {code}): {}", err_text()),
            ),
        })
    }
}

fn decode(b64: &[u8]) -> Result<Vec<u8>> {
    let clean: Vec<u8> = b64.iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(clean)
        .map_err(|_| Error::new(Code::Io, "KubernetesWorkspace: the pod sent a file that is not base64."))
}

fn kind_of_mode(raw_hex: &str) -> EntryType {
    match u32::from_str_radix(raw_hex, 16).map(|m| m & 0o170_000) {
        Ok(0o040_000) => EntryType::Directory,
        Ok(0o100_000) => EntryType::File,
        Ok(0o120_000) => EntryType::Symlink,
        _ => EntryType::Other,
    }
}

#[async_trait]
impl FsProvider for KubernetesWorkspace {
    async fn read_file(&self, path: &str) -> Result<String> {
        let bytes = self.read_file_bytes(path).await?;
        Ok(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }

    async fn write_file(&self, path: &str, content: &str) -> Result<()> {
        self.write_file_bytes(path, content.as_bytes()).await
    }

    async fn stat(&self, path: &str) -> Result<Option<Stat>> {
        let rel = self.norm(path)?;
        let out = match self.op("stat", &rel, "", Stdin::None).await {
            Err(e) if e.code == Code::NotFound => return Ok(None),
            r => r?,
        };
        let text = String::from_utf8_lossy(&out);
        let mut fields = text.split_whitespace();
        let (Some(mode), Some(size), Some(mtime)) = (fields.next(), fields.next(), fields.next()) else {
            return Err(Error::new(Code::Io, format!("KubernetesWorkspace: stat {rel} gave \"{}\"", text.trim())));
        };
        Ok(Some(Stat {
            kind: kind_of_mode(mode),
            size: size.parse().unwrap_or(0),
            modified_ms: mtime.parse::<i64>().ok().map(|s| s * 1000),
        }))
    }

    async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>> {
        let rel = self.norm(path)?;
        let out = self.op("readdir", &rel, "", Stdin::None).await?;
        let mut entries: Vec<DirEntry> = out
            .split(|&b| b == 0)
            .filter(|e| e.len() > 2 && e[1] == b'/')
            .map(|e| DirEntry {
                name: String::from_utf8_lossy(&e[2..]).into_owned(),
                kind: match e[0] {
                    b'd' => EntryType::Directory,
                    b'f' => EntryType::File,
                    b'l' => EntryType::Symlink,
                    _ => EntryType::Other,
                },
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        let rel = self.norm(path)?;
        self.op("mkdir", &rel, "", Stdin::None).await.map(|_| ())
    }

    async fn rm(&self, path: &str, recursive: bool) -> Result<()> {
        let rel = self.norm(path)?;
        if rel == "." {
            return Err(Error::new(Code::Denied, "Refused: the workspace root itself cannot be removed."));
        }
        self.op("rm", &rel, if recursive { "r" } else { "" }, Stdin::None).await.map(|_| ())
    }

    fn caps(&self) -> Caps {
        Caps { read_bytes: true, write_bytes: true, mode: true, real_path: true }
    }

    async fn read_file_bytes(&self, path: &str) -> Result<Vec<u8>> {
        let rel = self.norm(path)?;
        decode(&self.op("read", &rel, "", Stdin::None).await?)
    }

    async fn write_file_bytes(&self, path: &str, content: &[u8]) -> Result<()> {
        let rel = self.norm(path)?;
        if rel == "." {
            return Err(Error::new(Code::IsADirectory, "Is a directory: ."));
        }
        let b64 = base64::engine::general_purpose::STANDARD.encode(content).into_bytes();
        let lengths = format!("{} {}", b64.len(), content.len());
        self.op("write", &rel, &lengths, Stdin::Counted(b64)).await.map(|_| ())
    }

    async fn get_mode(&self, path: &str) -> Result<u32> {
        let rel = self.norm(path)?;
        let out = self.op("mode", &rel, "", Stdin::None).await?;
        u32::from_str_radix(String::from_utf8_lossy(&out).trim(), 8)
            .map_err(|_| Error::new(Code::Io, format!("KubernetesWorkspace: the mode of {rel} is not octal")))
    }

    async fn chmod(&self, path: &str, mode: u32) -> Result<()> {
        let rel = self.norm(path)?;
        self.op("chmod", &rel, &format!("{:o}", mode & 0o7777), Stdin::None).await.map(|_| ())
    }

    async fn real_path(&self, path: &str) -> Result<String> {
        let rel = self.norm(path)?;
        let out = self.op("realpath", &rel, "", Stdin::None).await?;
        let real = String::from_utf8_lossy(&out).trim_start_matches('/').to_string();
        Ok(if real.is_empty() { ".".to_string() } else { real })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_mode_names_the_entry_kind() {
        assert_eq!(kind_of_mode("41ed"), EntryType::Directory);
        assert_eq!(kind_of_mode("81a4"), EntryType::File);
        assert_eq!(kind_of_mode("a1ff"), EntryType::Symlink);
        assert_eq!(kind_of_mode("21b6"), EntryType::Other);
        assert_eq!(kind_of_mode("zz"), EntryType::Other);
    }

    #[test]
    fn base64_from_the_pod_may_be_wrapped() {
        assert_eq!(decode(b"aGVs\nbG8=\n").unwrap(), b"hello");
        assert_eq!(decode(b"").unwrap(), b"");
        assert!(decode(b"***").is_err());
    }
}
