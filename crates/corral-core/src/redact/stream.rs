//! Redaction of text that arrives in chunks (a command's streamed output, progress, background
//! reads): each chunk is given out redacted, holding back only a tail that could still be the
//! start of a secret, so a secret split between two chunks is never sent in pieces.

use std::sync::Arc;

use super::Redactor;

/// The most a token of the rules (but a private key block) spans; a private key block is held back
/// from its `-----BEGIN` until its end arrives (up to the rule's bound).
const SHORT: usize = 1100;
/// Where the last `-----BEGIN` (in any case) in `text` starts.
fn last_begin(text: &[u8]) -> Option<usize> {
    memchr::memmem::rfind_iter(text, b"-----").find(|&i| super::rules::pem_mark_at(text, i, b"begin"))
}

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

    /// What may be given out now of everything pushed so far, redacted. Held back: only a tail
    /// that could still be (the start of) a secret — a word that begins like a rule's token, the
    /// longest end that begins a literal value, an unended private key block — so other output
    /// goes out at once.
    pub fn push(&mut self, chunk: &str) -> String {
        self.held.push_str(chunk);
        let len = self.held.len();
        let from = self.context;
        let lits = self.redactor.literals();
        let short = SHORT.max(lits.longest);
        let hold = self.tail(self.held.as_bytes(), &lits);
        let mut cut = len - hold.min(short);
        let found = self.found(from);
        // A private key block not yet ended is held from its start.
        if self.redactor.rules {
            if let Some(p) = last_begin(self.held.as_bytes()) {
                // Ended: a secret found holds it and its `-----END` (a line of it alone, known from
                // before, does not end it).
                let held = self.held.as_bytes();
                let open = !found.iter().any(|(start, end, _, _)| {
                    (*start..*end).contains(&p.max(from))
                        && memchr::memmem::find_iter(&held[*start..*end], b"-----")
                            .any(|i| super::rules::pem_mark_at(held, start + i, b"end"))
                });
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
        // Kept as the context of what follows: the last word given out and the character before it
        // (up to the longest a token spans), so a word boundary, and a token whose public prefix
        // went out, are judged as on the whole text.
        let given = &self.held.as_bytes()[..cut];
        let run = given.iter().rev().take_while(|b| !b.is_ascii_whitespace()).count();
        let mut keep_from = cut - (run + 1).min(short + 1).min(cut);
        while !self.held.is_char_boundary(keep_from) {
            keep_from -= 1;
        }
        self.held.drain(..keep_from);
        self.context = cut - keep_from;
        out
    }

    /// The secrets in what is held that reach past the context; one that begins in the context
    /// (its first characters went out as part of a rule's public prefix) is replaced from there.
    fn found(&self, from: usize) -> Vec<super::Found> {
        self.redactor
            .find(&self.held, &self.session)
            .into_iter()
            .filter(|f| f.1 > from)
            .map(|(start, end, source, rule)| (start.max(from), end, source, rule))
            .collect()
    }

    /// How many bytes at the end of `held` (its context included: `push` never cuts before it)
    /// could still be (the start of) a secret: a word that has begun a rule's token (its whole
    /// prefix is there) is held from its start; an end that begins a literal value (which may hold
    /// spaces) is held. A word that is only part of a prefix (public text) goes out.
    fn tail(&self, rest: &[u8], lits: &super::Literals) -> usize {
        // A token spans at most `SHORT` bytes: a word longer than that is looked at only there.
        let run = rest.iter().rev().take(SHORT + 1).take_while(|b| !b.is_ascii_whitespace()).count();
        let mut hold = 0;
        if self.redactor.rules {
            for p in rest.len() - run..rest.len() {
                if super::rules::is_word(rest[p]) && !super::rules::boundary_before(rest, p) {
                    continue;
                }
                if super::rules::PREFIXES.iter().any(|x| rest[p..].starts_with(x.as_bytes())) {
                    hold = rest.len() - p;
                    break;
                }
            }
        }
        let literal = (1..=lits.longest.min(rest.len()))
            .rev()
            .find(|&k| {
                let end = &rest[rest.len() - k..];
                lits.list.iter().any(|(v, _, _)| v.as_bytes().starts_with(end))
            })
            .unwrap_or(0);
        hold.max(literal)
    }

    /// The rest, redacted (the stream ended).
    pub fn finish(&mut self) -> String {
        let from = self.context;
        let found = self.found(from);
        let out = self.redactor.replace(&self.held, &found, from, self.held.len(), &self.session);
        self.held.clear();
        self.context = 0;
        out
    }
}
