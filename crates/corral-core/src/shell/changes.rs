//! What a command changed in its working directory (`ExecResult.changes`), where a sandbox ran
//! it over an overlay (`changes: 'overlay'`), and the `Changes:` line the shell tool adds to its
//! note.

use serde_json::{json, Value};

/// The most paths of one kind the `Changes:` line names; the rest are counted.
pub const NOTE_PATHS: usize = 20;

/// A change that was not applied to the host, and why (`protected`, `changed on the host`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub path: String,
    pub reason: String,
}

/// Paths relative to the working directory; a new empty directory is `dir/`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
    pub refused: Vec<Refusal>,
    /// Kept in a layer, not applied (yet).
    pub pending: bool,
    /// Applied, but past what the checkpoints keep (`maxTurnBytes`, `maxFileBytes`): a rewind
    /// cannot undo them. Named in the note only.
    pub not_undoable: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.modified.is_empty()
            && self.deleted.is_empty()
            && self.refused.is_empty()
            && self.not_undoable.is_empty()
    }

    /// `{ added, modified, deleted, refused: [{ path, reason }], pending }`.
    pub fn to_json(&self) -> Value {
        json!({
            "added": self.added,
            "modified": self.modified,
            "deleted": self.deleted,
            "refused": self.refused.iter().map(|r| json!({ "path": r.path, "reason": r.reason })).collect::<Vec<_>>(),
            "pending": self.pending,
        })
    }

    /// From an adapter's answer; `None` when absent or not of this shape.
    pub fn from_json(v: &Value) -> Option<Changes> {
        let list = |k: &str| -> Option<Vec<String>> {
            v.get(k)?.as_array()?.iter().map(|s| s.as_str().map(str::to_string)).collect()
        };
        let refused = v
            .get("refused")?
            .as_array()?
            .iter()
            .map(|r| Some(Refusal { path: r.get("path")?.as_str()?.into(), reason: r.get("reason")?.as_str()?.into() }))
            .collect::<Option<Vec<_>>>()?;
        Some(Changes {
            added: list("added")?,
            modified: list("modified")?,
            deleted: list("deleted")?,
            refused,
            pending: v.get("pending").and_then(Value::as_bool).unwrap_or(false),
            not_undoable: Vec::new(),
        })
    }

    /// `Changes: M a.ts, A b.ts, D c.ts; refused: lib/.git (protected)`, at most
    /// [`NOTE_PATHS`] paths of each kind, then `and N more`; `None` when nothing changed.
    pub fn note(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut parts: Vec<String> = Vec::new();
        for (letter, word, paths) in
            [("M", "modified", &self.modified), ("A", "added", &self.added), ("D", "deleted", &self.deleted)]
        {
            parts.extend(paths.iter().take(NOTE_PATHS).map(|p| format!("{letter} {p}")));
            if paths.len() > NOTE_PATHS {
                parts.push(format!("and {} more {word}", paths.len() - NOTE_PATHS));
            }
        }
        let mut line = format!("Changes: {}", if parts.is_empty() { "none".to_string() } else { parts.join(", ") });
        if !self.refused.is_empty() {
            let shown: Vec<String> =
                self.refused.iter().take(NOTE_PATHS).map(|r| format!("{} ({})", r.path, r.reason)).collect();
            line.push_str(&format!("; refused: {}", shown.join(", ")));
            if self.refused.len() > NOTE_PATHS {
                line.push_str(&format!(", and {} more refused", self.refused.len() - NOTE_PATHS));
            }
        }
        if !self.not_undoable.is_empty() {
            let shown: Vec<&str> = self.not_undoable.iter().take(NOTE_PATHS).map(String::as_str).collect();
            line.push_str(&format!("; cannot be undone (too large): {}", shown.join(", ")));
            if self.not_undoable.len() > NOTE_PATHS {
                line.push_str(&format!(", and {} more", self.not_undoable.len() - NOTE_PATHS));
            }
        }
        if self.pending {
            line.push_str(" (pending, not applied)");
        }
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_changes_line_names_each_kind_and_counts_past_twenty() {
        let mut c = Changes {
            modified: vec!["a.ts".into()],
            added: (0..23).map(|i| format!("n{i}.ts")).collect(),
            deleted: vec!["c.ts".into()],
            refused: vec![Refusal { path: "lib/.git".into(), reason: "protected".into() }],
            pending: false,
            not_undoable: Vec::new(),
        };
        let line = c.note().unwrap();
        assert!(line.starts_with("Changes: M a.ts, A n0.ts, "), "{line}");
        assert!(line.contains("A n19.ts, and 3 more added, D c.ts; refused: lib/.git (protected)"), "{line}");
        assert!(!line.contains("n20.ts"), "{line}");
        assert_eq!(Changes::from_json(&c.to_json()), Some(c.clone()));
        c = Changes::default();
        assert_eq!(c.note(), None);
    }
}
