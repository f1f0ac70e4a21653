//! What each session has read, for the stale-file guard (`requireRead`): an edit or overwrite of
//! a file the session has not read is `NotRead`, and of a file whose content changed since the
//! session last read it (a command, another session, the user) is `Stale`. The session's own
//! writes count as reads. Contents are compared by SHA-256, so a touch that keeps the content is
//! not a change.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::error::{Code, Error, Result};

/// A file's content as the guard remembers it.
pub type Fingerprint = [u8; 32];

/// The fingerprint of content given in parts (a byte order mark and the text after it, say).
pub fn fingerprint(parts: &[&[u8]]) -> Fingerprint {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// The files each session read, with what they held then. One per tool set.
#[derive(Debug, Default)]
pub struct ReadLog {
    seen: Mutex<HashMap<(String, String), Fingerprint>>,
}

impl ReadLog {
    /// The session read (or itself wrote) `path` holding `content`.
    pub fn note(&self, session: &str, path: &str, content: Fingerprint) {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).insert((session.to_string(), path.to_string()), content);
    }

    /// Whether the session may change `path`, which holds `current` now.
    pub fn check(&self, session: &str, path: &str, current: Fingerprint) -> Result<()> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match seen.get(&(session.to_string(), path.to_string())) {
            None => Err(Error::new(Code::NotRead, format!("Read {path} first: it has not been read in this session."))),
            Some(fp) if *fp != current => Err(Error::new(
                Code::Stale,
                format!("{path} changed since it was last read. Read it again before editing it."),
            )),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unread_file_is_not_read_a_changed_one_stale_and_sessions_are_apart() {
        let log = ReadLog::default();
        let (a, b) = (fingerprint(&[b"one"]), fingerprint(&[b"o", b"ne"]));
        assert_eq!(a, b, "parts make the same fingerprint as the whole");
        assert_eq!(log.check("s", "f", a).unwrap_err().code, Code::NotRead);
        log.note("s", "f", a);
        log.check("s", "f", a).unwrap();
        assert_eq!(log.check("s", "f", fingerprint(&[b"two"])).unwrap_err().code, Code::Stale);
        assert_eq!(log.check("other", "f", a).unwrap_err().code, Code::NotRead);
    }
}
