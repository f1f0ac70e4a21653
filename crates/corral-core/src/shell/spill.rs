//! `spillDir`: when a stream's output is cut for the model, all of it (up to 32 MiB) is saved as
//! `<spillDir>/<toolCallId or a fresh id>.stdout.log` (`.stderr.log`) in the workspace, through a
//! file provider, and the newest 50 such files are kept. The file tools refuse to change them.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::Mutex;

use super::Stream;
use crate::error::Result;
use crate::fs::FsProvider;

/// The most of one stream saved.
pub const SPILL_MAX_BYTES: usize = 32 * 1024 * 1024;
/// How many saved outputs are kept.
pub const SPILL_KEEP: usize = 50;

pub struct Spill {
    pub dir: String,
    fs: Arc<dyn FsProvider>,
    /// The files saved, oldest first; read from the directory on the first save.
    kept: Mutex<Option<VecDeque<String>>>,
}

impl std::fmt::Debug for Spill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spill").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// A file name from a tool call id: its safe characters, or a fresh id.
fn file_id(tool_call_id: Option<&str>) -> String {
    match tool_call_id {
        Some(id)
            if !id.is_empty()
                && id.len() <= 128
                && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                && !id.starts_with('.') =>
        {
            id.to_string()
        }
        _ => {
            use rand::Rng;
            format!("run-{:016x}", rand::thread_rng().gen::<u64>())
        }
    }
}

impl Spill {
    /// `dir` is a normalized workspace path; it is protected from the file tools.
    pub fn new(dir: String, fs: Arc<dyn FsProvider>) -> Spill {
        crate::tools::protect_spill_dir(fs.as_ref(), &dir);
        Spill { dir, fs, kept: Mutex::new(None) }
    }

    /// Saves one stream's whole output; returns its workspace path.
    pub async fn save(&self, tool_call_id: Option<&str>, stream: Stream, text: &str) -> Result<String> {
        let path = format!("{}/{}.{}.log", self.dir, file_id(tool_call_id), stream.as_str());
        let body = if text.len() > SPILL_MAX_BYTES {
            let mut end = SPILL_MAX_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}\n... [the rest was not saved: the output exceeded 32 MiB]\n", &text[..end])
        } else {
            text.to_string()
        };
        let mut kept = self.kept.lock().await;
        if kept.is_none() {
            let mut existing: Vec<String> = match self.fs.readdir(&self.dir).await {
                Ok(entries) => entries
                    .into_iter()
                    .filter(|e| e.name.ends_with(".log"))
                    .map(|e| format!("{}/{}", self.dir, e.name))
                    .collect(),
                Err(_) => Vec::new(),
            };
            existing.sort();
            *kept = Some(existing.into());
        }
        self.fs.write_file(&path, &body).await?;
        let list = kept.as_mut().expect("read above");
        list.retain(|p| p != &path);
        list.push_back(path.clone());
        while list.len() > SPILL_KEEP {
            if let Some(old) = list.pop_front() {
                let _ = self.fs.rm(&old, false).await;
            }
        }
        Ok(path)
    }
}
