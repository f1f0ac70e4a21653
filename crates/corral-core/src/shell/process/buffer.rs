//! A background process's output not read yet: bounded, keeping its head and its tail, with the
//! number of bytes cut between them.

/// The most unread bytes of one stream kept: half from its start, half from its end.
pub const STREAM_BYTES: usize = 512 * 1024;

#[derive(Debug)]
pub struct Unread {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    cut: u64,
    /// The bound: `STREAM_BYTES` unless the process was started with another.
    limit: usize,
}

impl Default for Unread {
    fn default() -> Self {
        Unread::with_limit(STREAM_BYTES)
    }
}

impl Unread {
    pub fn with_limit(limit: usize) -> Self {
        Unread { head: Vec::new(), tail: Default::default(), cut: 0, limit: limit.max(2) }
    }

    pub fn push(&mut self, mut chunk: &[u8]) {
        let half = self.limit / 2;
        if self.head.len() < half {
            let n = (half - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
        }
        if chunk.len() >= half {
            self.cut += (self.tail.len() + chunk.len() - half) as u64;
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - half..]);
            return;
        }
        let over = (self.tail.len() + chunk.len()).saturating_sub(half);
        self.cut += over as u64;
        self.tail.drain(..over);
        self.tail.extend(chunk);
    }

    pub fn is_empty(&self) -> bool {
        self.head.is_empty() && self.tail.is_empty() && self.cut == 0
    }

    /// What was not read yet, and how many bytes were cut from its middle; empties the buffer.
    /// With `marker`, a cut middle is a line that says how many bytes were left out (for a
    /// model); without, the caller says so itself (a byte stream must not get text spliced in).
    pub fn take(&mut self, marker: bool) -> (Vec<u8>, u64) {
        let mut out = std::mem::take(&mut self.head);
        let cut = std::mem::take(&mut self.cut);
        if cut > 0 && marker {
            out.extend_from_slice(
                format!(
                    "\n[... {cut} bytes of output cut: more than {} KiB came between reads ...]\n",
                    self.limit / 1024
                )
                .as_bytes(),
            );
        }
        out.extend(self.tail.drain(..));
        (out, cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_bound_keeps_head_and_tail_and_says_how_much_was_cut() {
        let mut u = Unread::default();
        u.push(b"hello ");
        u.push(b"world");
        assert_eq!(u.take(true), (b"hello world".to_vec(), 0));
        assert!(u.is_empty());
        let big = vec![b'x'; STREAM_BYTES * 3];
        u.push(b"START");
        u.push(&big);
        u.push(b"END");
        let text = String::from_utf8(u.take(true).0).unwrap();
        assert!(text.starts_with("STARTxxx"), "{}", &text[..20]);
        assert!(text.ends_with("xxxEND"));
        let cut = 5 + STREAM_BYTES * 3 + 3 - STREAM_BYTES;
        assert!(
            text.contains(&format!("[... {cut} bytes of output cut")),
            "{}",
            &text[STREAM_BYTES / 2 - 10..STREAM_BYTES / 2 + 120]
        );
        assert!(text.len() < STREAM_BYTES + 200);
        // Without the marker: the bytes kept, and the count apart.
        let mut u = Unread::with_limit(8);
        u.push(b"0123456789abcdef");
        assert_eq!(u.take(false), (b"0123cdef".to_vec(), 8));
    }
}
