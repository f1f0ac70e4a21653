//! An in-memory tree: files and directories in ordered maps, with the same path rules as disk.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Caps, DirEntry, EntryType, FsProvider, Stat};
use crate::error::{Code, Error, Result};
use crate::path::{normalize, Flavor};

/// `MemoryWorkspace({ files?, exec? })`: the files, and whether an exec stub was given.
pub struct MemoryWorkspaceOptions {
    pub files: BTreeMap<String, String>,
    pub exec: bool,
}

impl MemoryWorkspaceOptions {
    pub fn from_options(v: &serde_json::Value) -> Result<MemoryWorkspaceOptions> {
        use crate::options::{is_function, Reader};
        let r = Reader::new("MemoryWorkspace", v, &["files", "exec"])?;
        let files =
            r.string_map("files").map_err(|_| r.err("files must be an object of path to content (strings)."))?;
        let exec = match r.get("exec") {
            None => false,
            Some(f) if is_function(f) => true,
            Some(_) => return Err(r.err("exec must be a function.")),
        };
        Ok(MemoryWorkspaceOptions { files, exec })
    }
}

#[derive(Default)]
struct Tree {
    files: BTreeMap<String, Vec<u8>>,
    modes: BTreeMap<String, u32>,
    dirs: BTreeSet<String>,
}

impl Tree {
    fn is_dir(&self, p: &str) -> bool {
        p == "." || self.dirs.contains(p)
    }
    fn add_parents(&mut self, p: &str) -> Result<()> {
        let mut cur = String::new();
        let parts: Vec<&str> = p.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !cur.is_empty() {
                cur.push('/');
            }
            cur.push_str(part);
            if self.files.contains_key(&cur) {
                return Err(Error::new(Code::NotAFile, format!("Not a directory: {cur}")));
            }
            self.dirs.insert(cur.clone());
        }
        Ok(())
    }
}

pub struct MemoryFs {
    tree: Mutex<Tree>,
    guarded: super::GuardedDirs,
}

const DEFAULT_MODE: u32 = 0o644;

impl Default for MemoryFs {
    fn default() -> Self {
        MemoryFs { tree: Mutex::new(Tree::default()), guarded: Default::default() }
    }
}

impl MemoryFs {
    /// A tree holding `files` (workspace path → content).
    pub fn new<I: IntoIterator<Item = (String, Vec<u8>)>>(files: I) -> Result<MemoryFs> {
        let fs = MemoryFs::default();
        {
            let mut t = fs.tree.lock().unwrap();
            for (path, content) in files {
                let p = normalize(&path, Flavor::Both)
                    .map_err(|e| Error::config(format!("MemoryWorkspace files: {}", e.message)))?;
                if p == "." {
                    return Err(Error::config("MemoryWorkspace files: a file cannot be the root."));
                }
                t.add_parents(&p).map_err(|e| Error::config(format!("MemoryWorkspace files: {}", e.message)))?;
                t.files.insert(p, content);
            }
        }
        Ok(fs)
    }

    fn norm(path: &str) -> Result<String> {
        normalize(path, Flavor::Both)
    }

    /// Every file, path → text (lossy for non-UTF-8 content).
    pub fn snapshot(&self) -> BTreeMap<String, String> {
        let t = self.tree.lock().unwrap();
        t.files.iter().map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned())).collect()
    }

    /// Files under a normalized directory (all files when `dir` is `.`), in path order, with
    /// their content: the search engine's fast path.
    pub fn files_under(&self, dir: &str) -> Vec<(String, Vec<u8>)> {
        let t = self.tree.lock().unwrap();
        if dir == "." {
            return t.files.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        }
        if let Some(v) = t.files.get(dir) {
            return vec![(dir.to_string(), v.clone())];
        }
        let prefix = format!("{dir}/");
        t.files
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

#[async_trait]
impl FsProvider for MemoryFs {
    fn guarded_dirs(&self) -> Option<&super::GuardedDirs> {
        Some(&self.guarded)
    }
    async fn read_file(&self, path: &str) -> Result<String> {
        let bytes = self.read_file_bytes(path).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    async fn write_file(&self, path: &str, content: &str) -> Result<()> {
        self.write_file_bytes(path, content.as_bytes()).await
    }

    async fn stat(&self, path: &str) -> Result<Option<Stat>> {
        let p = Self::norm(path)?;
        let t = self.tree.lock().unwrap();
        if let Some(v) = t.files.get(&p) {
            return Ok(Some(Stat { kind: EntryType::File, size: v.len() as u64, modified_ms: None }));
        }
        Ok(t.is_dir(&p).then_some(Stat { kind: EntryType::Directory, size: 0, modified_ms: None }))
    }

    async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>> {
        let p = Self::norm(path)?;
        let t = self.tree.lock().unwrap();
        if t.files.contains_key(&p) {
            return Err(Error::new(Code::NotAFile, format!("Not a directory: {p}")));
        }
        if !t.is_dir(&p) {
            return Err(Error::not_found(&p));
        }
        let prefix = if p == "." { String::new() } else { format!("{p}/") };
        let direct = |k: &String| k.starts_with(&prefix) && !k[prefix.len()..].contains('/');
        let mut out: Vec<DirEntry> = t
            .dirs
            .iter()
            .filter(|k| direct(k))
            .map(|k| DirEntry { name: k[prefix.len()..].to_string(), kind: EntryType::Directory })
            .chain(
                t.files
                    .keys()
                    .filter(|k| direct(k))
                    .map(|k| DirEntry { name: k[prefix.len()..].to_string(), kind: EntryType::File }),
            )
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        let p = Self::norm(path)?;
        if p == "." {
            return Ok(());
        }
        let mut t = self.tree.lock().unwrap();
        if t.files.contains_key(&p) {
            return Err(Error::new(Code::NotAFile, format!("A file is in the way: {p}")));
        }
        t.add_parents(&p)?;
        t.dirs.insert(p);
        Ok(())
    }

    async fn rm(&self, path: &str, recursive: bool) -> Result<()> {
        let p = Self::norm(path)?;
        if p == "." {
            return Err(Error::new(Code::Denied, "Refused: the workspace root itself cannot be removed."));
        }
        let mut t = self.tree.lock().unwrap();
        if t.files.remove(&p).is_some() {
            t.modes.remove(&p);
            return Ok(());
        }
        if !t.dirs.contains(&p) {
            return Err(Error::not_found(&p));
        }
        let prefix = format!("{p}/");
        let has_children = t.files.keys().chain(t.dirs.iter()).any(|k| k.starts_with(&prefix));
        if has_children && !recursive {
            return Err(Error::new(Code::IsADirectory, format!("Directory not empty: {p}")));
        }
        t.files.retain(|k, _| !k.starts_with(&prefix));
        t.modes.retain(|k, _| !k.starts_with(&prefix));
        t.dirs.retain(|k| !k.starts_with(&prefix) && *k != p);
        Ok(())
    }

    fn caps(&self) -> Caps {
        Caps { read_bytes: true, write_bytes: true, mode: true, real_path: false }
    }

    async fn read_file_bytes(&self, path: &str) -> Result<Vec<u8>> {
        let p = Self::norm(path)?;
        let t = self.tree.lock().unwrap();
        match t.files.get(&p) {
            Some(v) => Ok(v.clone()),
            None if t.is_dir(&p) => Err(Error::new(Code::IsADirectory, format!("Is a directory: {p}"))),
            None => Err(Error::not_found(&p)),
        }
    }

    async fn write_file_bytes(&self, path: &str, content: &[u8]) -> Result<()> {
        let p = Self::norm(path)?;
        let mut t = self.tree.lock().unwrap();
        if t.is_dir(&p) {
            return Err(Error::new(Code::IsADirectory, format!("Is a directory: {p}")));
        }
        if t.modes.get(&p).is_some_and(|m| m & 0o222 == 0) {
            return Err(Error::new(Code::ReadOnly, format!("File is read-only: {p}")));
        }
        t.add_parents(&p)?;
        t.files.insert(p, content.to_vec());
        Ok(())
    }

    async fn get_mode(&self, path: &str) -> Result<u32> {
        let p = Self::norm(path)?;
        let t = self.tree.lock().unwrap();
        if !t.files.contains_key(&p) {
            return Err(Error::not_found(&p));
        }
        Ok(*t.modes.get(&p).unwrap_or(&DEFAULT_MODE))
    }

    async fn chmod(&self, path: &str, mode: u32) -> Result<()> {
        let p = Self::norm(path)?;
        let mut t = self.tree.lock().unwrap();
        if !t.files.contains_key(&p) {
            return Err(Error::not_found(&p));
        }
        t.modes.insert(p, mode & 0o7777);
        Ok(())
    }

    fn as_memory(&self) -> Option<&MemoryFs> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tree_basics() {
        let fs =
            MemoryFs::new([("src/a.ts".to_string(), b"a".to_vec()), ("README.md".to_string(), b"r".to_vec())]).unwrap();
        let names: Vec<_> = fs.readdir(".").await.unwrap().into_iter().map(|e| (e.name, e.kind)).collect();
        assert_eq!(names, vec![("README.md".into(), EntryType::File), ("src".into(), EntryType::Directory)]);
        fs.write_file("src/b/c.ts", "c").await.unwrap();
        assert_eq!(fs.stat("src/b").await.unwrap().unwrap().kind, EntryType::Directory);
        assert_eq!(fs.read_file("../x").await.unwrap_err().code, Code::OutsideWorkspace);
        assert_eq!(fs.rm("src", false).await.unwrap_err().code, Code::IsADirectory);
        fs.rm("src", true).await.unwrap();
        assert_eq!(fs.snapshot().keys().cloned().collect::<Vec<_>>(), vec!["README.md".to_string()]);
    }
}
