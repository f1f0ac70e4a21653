//! Finding a chunk's lines in a file, as codex's `seek_sequence` does: four passes, each more
//! forgiving than the last, and the first that finds the lines wins.
//!
//! The passes: exact; ignoring trailing whitespace; ignoring whitespace at both ends; and also
//! with Unicode dashes, quotes and spaces read as their ASCII forms (a model that types `—` or
//! `’` where the file has `-` or `'` still finds its place).
//!
//! The cost is bounded whatever the file and the chunk: each line is reduced to a hash once per
//! pass (no allocation per comparison), a window of the chunk's length is found by a rolling hash
//! over those, and only a window whose hash matches is compared line by line. The caller's `stop`
//! is asked between blocks of lines, so an aborted call ends within milliseconds.

use crate::error::Result;

/// Lines between two checks of `stop`.
const CHECK_EVERY: usize = 16 * 1024;
/// The rolling hash's base (odd, so every power is invertible modulo 2^64).
const BASE: u64 = 0x100_0000_01b3;

type Same = fn(&str, &str) -> bool;

const PASSES: [Same; 4] = [
    |a, b| a == b,
    |a, b| a.trim_end() == b.trim_end(),
    |a, b| a.trim() == b.trim(),
    |a, b| a.trim().chars().map(ascii).eq(b.trim().chars().map(ascii)),
];

/// One line's hash under pass `pass` (equal lines under the pass hash equally).
fn line_hash(pass: usize, line: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    };
    match pass {
        0 => line.bytes().for_each(&mut feed),
        1 => line.trim_end().bytes().for_each(&mut feed),
        2 => line.trim().bytes().for_each(&mut feed),
        _ => {
            let mut buf = [0u8; 4];
            for c in line.trim().chars().map(ascii) {
                c.encode_utf8(&mut buf).bytes().for_each(&mut feed);
            }
        }
    }
    h
}

/// A file's lines, with each pass's line hashes made when first needed.
pub struct Seeker<'a> {
    lines: &'a [String],
    hashes: [Option<Vec<u64>>; 4],
    stop: &'a dyn Fn() -> Result<()>,
}

impl<'a> Seeker<'a> {
    pub fn new(lines: &'a [String], stop: &'a dyn Fn() -> Result<()>) -> Seeker<'a> {
        Seeker { lines, hashes: Default::default(), stop }
    }

    fn hashes(&mut self, pass: usize) -> Result<&[u64]> {
        if self.hashes[pass].is_none() {
            let mut v = Vec::with_capacity(self.lines.len());
            for (i, l) in self.lines.iter().enumerate() {
                if i % CHECK_EVERY == 0 {
                    (self.stop)()?;
                }
                v.push(line_hash(pass, l));
            }
            self.hashes[pass] = Some(v);
        }
        Ok(self.hashes[pass].as_deref().unwrap_or_default())
    }

    /// Where `pattern` starts in the lines, searching from `start`; with `eof` (a chunk marked
    /// `*** End of File`), only at the end of the file. An empty pattern is found at `start`.
    pub fn seek(&mut self, pattern: &[String], start: usize, eof: bool) -> Result<Option<usize>> {
        if pattern.is_empty() {
            return Ok(Some(start));
        }
        let lines = self.lines;
        if pattern.len() > lines.len() {
            return Ok(None);
        }
        let last = lines.len() - pattern.len();
        // Never before `start`: a chunk cannot land inside the one before it.
        let from = if eof { last.max(start) } else { start };
        if from > last {
            return Ok(None);
        }
        let m = pattern.len();
        for (pass, same) in PASSES.iter().enumerate() {
            let stop = self.stop;
            let h = self.hashes(pass)?;
            let roll = |acc: u64, x: u64| acc.wrapping_mul(BASE).wrapping_add(x);
            let want = pattern.iter().fold(0u64, |acc, p| roll(acc, line_hash(pass, p)));
            let top = (1..m).fold(1u64, |acc, _| acc.wrapping_mul(BASE));
            let mut window = h[from..from + m].iter().fold(0u64, |acc, &x| roll(acc, x));
            let mut i = from;
            loop {
                if window == want && lines[i..i + m].iter().zip(pattern).all(|(l, p)| same(l, p)) {
                    return Ok(Some(i));
                }
                if i == last {
                    break;
                }
                window = roll(window.wrapping_sub(h[i].wrapping_mul(top)), h[i + m]);
                i += 1;
                if (i - from) % CHECK_EVERY == 0 {
                    stop()?;
                }
            }
        }
        Ok(None)
    }
}

/// A character of typographic punctuation as its ASCII form.
fn ascii(c: char) -> char {
    match c {
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}' | '\u{2212}' => '-',
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
        '\u{00A0}' | '\u{2002}' | '\u{2003}' | '\u{2004}' | '\u{2005}' | '\u{2006}' | '\u{2007}' | '\u{2008}'
        | '\u{2009}' | '\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        c => c,
    }
}

/// `Seeker::seek` once, never stopped.
#[cfg(test)]
pub fn seek(lines: &[String], pattern: &[String], start: usize, eof: bool) -> Option<usize> {
    Seeker::new(lines, &|| Ok(())).seek(pattern, start, eof).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn each_pass_finds_what_the_one_before_could_not() {
        let lines = v(&["fn a() {", "    x = 1;   ", "  y = \u{2018}q\u{2019} \u{2014} z", "}"]);
        assert_eq!(seek(&lines, &v(&["}"]), 0, false), Some(3));
        assert_eq!(seek(&lines, &v(&["    x = 1;"]), 0, false), Some(1));
        assert_eq!(seek(&lines, &v(&["x = 1;"]), 0, false), Some(1));
        assert_eq!(seek(&lines, &v(&["y = 'q' - z"]), 0, false), Some(2));
        assert_eq!(seek(&lines, &v(&["nowhere"]), 0, false), None);
    }

    #[test]
    fn the_search_starts_at_start_and_an_end_of_file_chunk_matches_only_at_the_end() {
        let lines = v(&["x", "y", "x", "y"]);
        assert_eq!(seek(&lines, &v(&["x"]), 1, false), Some(2));
        assert_eq!(seek(&lines, &v(&["x", "y"]), 0, true), Some(2));
        assert_eq!(seek(&lines, &v(&["y", "x"]), 0, true), None);
        // The end of the file, but not before where the search starts.
        assert_eq!(seek(&lines, &v(&["y"]), 4, true), None);
        assert_eq!(seek(&lines, &v(&["a", "b", "c", "d", "e"]), 0, false), None);
        assert_eq!(seek(&lines, &[], 3, false), Some(3));
    }

    #[test]
    fn identical_lines_and_a_long_chunk_that_fails_at_its_last_line_cost_one_pass_over_the_file() {
        // 200,000 identical lines and 10,000 lines to find whose last differs: N x M comparisons
        // for a naive search (minutes); one rolling pass per rule here.
        let lines = vec!["x".to_string(); 200_000];
        let mut pattern = vec!["x".to_string(); 9_999];
        pattern.push("y".to_string());
        assert_eq!(seek(&lines, &pattern, 0, false), None);
        pattern.pop();
        assert_eq!(seek(&lines, &pattern, 5, false), Some(5));
    }

    #[test]
    fn a_stopped_search_returns_the_stop_error() {
        let lines = vec!["x".to_string(); 100_000];
        let pattern = vec!["y".to_string()];
        let stop = || Err(crate::error::Error::aborted());
        let e = Seeker::new(&lines, &stop).seek(&pattern, 0, false).unwrap_err();
        assert_eq!(e.code, crate::error::Code::Aborted);
    }

    #[test]
    fn an_exact_match_later_wins_over_a_loose_match_earlier() {
        let lines = v(&["a  ", "a"]);
        assert_eq!(seek(&lines, &v(&["a"]), 0, false), Some(1));
    }
}
