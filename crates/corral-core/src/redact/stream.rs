//! Redaction of text that arrives in chunks (a command's streamed output, progress, background
//! reads): each chunk is given out redacted, holding back only a tail that could still be the
//! start of a secret, so a secret split between two chunks is never sent in pieces.

use std::sync::Arc;

use super::Redactor;

/// The most a token of the rules (but a private key block) or a value spans; a private key block
/// is held back from its `-----BEGIN` until its end arrives (up to the rule's bound).
const SHORT: usize = 1100;
const BEGIN: &str = "-----BEGIN";

pub struct Stream {
    redactor: Arc<Redactor>,
    session: String,
    /// The last character given out (so a word boundary before the held text is judged as on the
    /// whole text), then what is held.
    held: String,
    context: usize,
}

impl Stream {
    pub fn new(redactor: Arc<Redactor>, session: &str) -> Stream {
        Stream { redactor, session: session.to_string(), held: String::new(), context: 0 }
    }

    /// What may be given out now of everything pushed so far, redacted.
    pub fn push(&mut self, chunk: &str) -> String {
        self.held.push_str(chunk);
        let len = self.held.len();
        let from = self.context;
        let short = SHORT.max(self.redactor.literals().longest);
        let mut cut = len.saturating_sub(short).max(from);
        let found: Vec<_> = self.redactor.find(&self.held).into_iter().filter(|f| f.0 >= from).collect();
        // A private key block not yet ended is held from its start.
        if self.redactor.rules {
            if let Some(p) = self.held[from..].rfind(BEGIN).map(|p| p + from) {
                let open = !found.iter().any(|(start, end, _, _)| (*start..*end).contains(&p));
                if open && len - p <= self.redactor.window() {
                    cut = cut.min(p);
                }
            }
        }
        // A secret that reaches the cut might go on: keep all of it.
        for (start, end, _, _) in &found {
            if *start < cut && *end >= cut {
                cut = *start;
            }
        }
        while !self.held.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut <= from {
            return String::new();
        }
        let out = self.redactor.replace(&self.held, &found, from, cut, &self.session);
        // Keep the last character given out as the context of what follows.
        let last = self.held[..cut].chars().next_back().map_or(0, char::len_utf8);
        self.held.drain(..cut - last);
        self.context = last;
        out
    }

    /// The rest, redacted (the stream ended).
    pub fn finish(&mut self) -> String {
        let from = self.context;
        let found: Vec<_> = self.redactor.find(&self.held).into_iter().filter(|f| f.0 >= from).collect();
        let out = self.redactor.replace(&self.held, &found, from, self.held.len(), &self.session);
        self.held.clear();
        self.context = 0;
        out
    }
}
