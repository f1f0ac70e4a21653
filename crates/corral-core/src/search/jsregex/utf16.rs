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
