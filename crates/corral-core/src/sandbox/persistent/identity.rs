//! Per-identity state: what a session of an identity left in `/tmp` and its home after
//! `onFirstCreate`, kept under `<root>/.identities/<sha256 of the identity>/` (no session id
//! starts with a dot) and copied into each later session of that identity, so it does not set
//! itself up again. The copy keeps symbolic links as links (never followed: the session's
//! commands made them), file modes, and skips other special files; `std::fs::copy` shares the
//! data blocks where the file system can (`copy_file_range`).

use std::io;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The state's directory for `identity`.
pub(super) fn dir(root: &Path, identity: &str) -> PathBuf {
    root.join(".identities").join(hex::encode(Sha256::digest(identity.as_bytes())))
}

/// Copies the tree at `from` to `to` (which must not exist), walking without recursion.
pub(super) fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    let mut stack = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = stack.pop() {
        let meta = std::fs::symlink_metadata(&src)?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            symlink(std::fs::read_link(&src)?, &dst)?;
        } else if kind.is_dir() {
            std::fs::create_dir(&dst)?;
            for entry in std::fs::read_dir(&src)? {
                let entry = entry?;
                stack.push((entry.path(), dst.join(entry.file_name())));
            }
            std::fs::set_permissions(
                &dst,
                std::fs::Permissions::from_mode(meta.permissions().mode() & 0o7777 | 0o700),
            )?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Replaces `identity`'s state with the session's `/tmp` and home (made aside, then renamed in,
/// so a later session never sees half of it).
pub(super) fn save(root: &Path, identity: &str, session: &Path) -> io::Result<()> {
    let target = dir(root, identity);
    let parent = target.parent().expect("under .identities");
    std::fs::create_dir_all(parent)?;
    let aside = parent.join(format!(".new-{:016x}", rand::random::<u64>()));
    std::fs::create_dir(&aside)?;
    let made = (|| {
        copy_tree(&session.join("tmp"), &aside.join("tmp"))?;
        copy_tree(&session.join("home"), &aside.join("home"))?;
        std::fs::write(aside.join("done"), b"")
    })();
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&aside);
        return Err(e);
    }
    let old = parent.join(format!(".old-{:016x}", rand::random::<u64>()));
    let had = std::fs::rename(&target, &old).is_ok();
    std::fs::rename(&aside, &target)?;
    if had {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
}
