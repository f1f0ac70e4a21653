//! The stored document of a session (its format is described in the module above): what was
//! before each turn's first write of a path, and the audit trail of writes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Code, Error, Result};
use crate::path::shown;

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionData {
    pub(super) format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) dropped_through: Option<u32>,
    #[serde(default)]
    pub(super) turns: BTreeMap<u32, BTreeMap<String, Backup>>,
}

impl SessionData {
    pub(super) fn new() -> Self {
        SessionData { format: FORMAT.to_string(), dropped_through: None, turns: BTreeMap::new() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Backup {
    pub(super) before: Before,
    pub(super) writes: Vec<WriteRecord>,
    /// Recorded for a command's changes (overlay mode): the path is seen as it is, a link not
    /// followed, and may be a link or a directory before or after.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) shell: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Encoding {
    Utf8,
    Base64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub(super) enum Before {
    Missing,
    File {
        encoding: Encoding,
        content: String,
        sha256: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<u32>,
    },
    TooLarge {
        size: u64,
    },
    /// A symbolic link (its target, as file content is stored).
    Link {
        encoding: Encoding,
        target: String,
    },
    /// A directory (its permission bits).
    Dir {
        mode: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct WriteRecord {
    pub(super) from: Option<String>,
    pub(super) to: String,
    pub(super) done: bool,
}

pub(super) const TOO_LARGE_MARK: &str = "too-large";
/// A write record's `to` when the change deleted the file.
pub(super) const DELETED_MARK: &str = "deleted";
/// A write record's `to` (and a state's key) for a directory.
pub(super) const DIR_MARK: &str = "dir";

/// A link's key in write records: its target hashed, apart from any file's content hash.
pub(super) fn link_key(target: &[u8]) -> String {
    format!("link:{}", sha256(target))
}

impl Before {
    pub(super) fn file(bytes: Vec<u8>, mode: Option<u32>) -> Before {
        let sha256 = sha256(&bytes);
        let (encoding, content) = match String::from_utf8(bytes) {
            Ok(text) => (Encoding::Utf8, text),
            Err(e) => (Encoding::Base64, base64_encode(e.as_bytes())),
        };
        Before::File { encoding, content, sha256, mode }
    }
}

impl Before {
    /// A link's state, as command checkpoints record it (unix only: `checkpoints/shell.rs`).
    #[cfg_attr(not(unix), allow(dead_code))]
    pub(super) fn link(target: Vec<u8>) -> Before {
        let (encoding, target) = match String::from_utf8(target) {
            Ok(text) => (Encoding::Utf8, text),
            Err(e) => (Encoding::Base64, base64_encode(e.as_bytes())),
        };
        Before::Link { encoding, target }
    }

    /// The state's key, as write records name states: `None` for a missing path.
    pub(super) fn key(&self, path: &str) -> Result<Option<String>> {
        Ok(match self {
            Before::Missing => None,
            Before::File { sha256, .. } => Some(sha256.clone()),
            Before::TooLarge { .. } => Some(TOO_LARGE_MARK.to_string()),
            Before::Link { encoding, target } => Some(link_key(&decode_content(path, *encoding, target)?)),
            Before::Dir { .. } => Some(DIR_MARK.to_string()),
        })
    }
}

pub(super) fn decode_content(path: &str, encoding: Encoding, content: &str) -> Result<Vec<u8>> {
    match encoding {
        Encoding::Utf8 => Ok(content.as_bytes().to_vec()),
        Encoding::Base64 => base64_decode(content)
            .ok_or_else(|| Error::new(Code::Io, format!("The checkpoint of {} is corrupt (bad base64).", shown(path)))),
    }
}

pub(super) fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub(super) fn base64_encode(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

pub(super) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

pub(super) fn parse_session(session: &str, value: serde_json::Value) -> Result<SessionData> {
    let data: SessionData = serde_json::from_value(value).map_err(|e| {
        Error::new(
            Code::Io,
            format!("The checkpoint data of session {} is not in the expected format: {e}", shown(session)),
        )
    })?;
    if data.format != FORMAT {
        return Err(Error::new(
            Code::Io,
            format!(
                "The checkpoint data of session {} has format {:?}; this version reads {FORMAT:?}.",
                shown(session),
                data.format
            ),
        ));
    }
    Ok(data)
}
