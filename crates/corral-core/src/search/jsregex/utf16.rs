//! Strings as JavaScript sees them without `u`/`v`: UTF-16 code units.

use super::*;

pub(super) fn show(pattern: &str, flags: &str) -> String {
    format!("/{pattern}/{flags}")
}

/// Whether `text` has a character outside the BMP (a 4-byte UTF-8 sequence).
pub(super) fn has_astral(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut chunks = bytes.chunks_exact(32);
    for chunk in &mut chunks {
        if chunk.iter().fold(false, |acc, &b| acc | (b >= 0xF0)) {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| b >= 0xF0)
}

/// Re-encodes `text` so that each astral character becomes its two UTF-16 units, each unit `u`
/// written as the character `SURR_BASE + u`.
pub(super) fn to_units(text: &str, out: &mut String) {
    out.clear();
    out.reserve(text.len() + 8);
    for c in text.chars() {
        let cp = c as u32;
        if cp <= MAX_UNIT {
            out.push(c);
        } else {
            let v = cp - 0x10000;
            let hi = SURR_LO + (v >> 10);
            let lo = 0xDC00 + (v & 0x3FF);
            out.push(char::from_u32(SURR_BASE + hi).expect("private-use plane"));
            out.push(char::from_u32(SURR_BASE + lo).expect("private-use plane"));
        }
    }
}

/// Maps offsets in the text `to_units` made back to the original, for offsets asked in order.
pub(super) struct OffsetsBack<'a> {
    chars: std::str::CharIndices<'a>,
    /// The next original character and its offsets (original, converted).
    next: Option<(usize, char)>,
    converted: usize,
    end: usize,
}

impl<'a> OffsetsBack<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        let mut chars = text.char_indices();
        let next = chars.next();
        OffsetsBack { chars, next, converted: 0, end: text.len() }
    }

    /// The original offset of the character that covers converted offset `at` (the start of an
    /// astral character for either of its units). Offsets must not decrease between calls.
    pub(super) fn original(&mut self, at: usize) -> usize {
        while let Some((i, c)) = self.next {
            let width = if c as u32 <= MAX_UNIT { c.len_utf8() } else { 8 };
            if at < self.converted + width {
                return i;
            }
            self.converted += width;
            self.next = self.chars.next();
        }
        self.end
    }
}
