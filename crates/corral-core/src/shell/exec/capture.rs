//! Output capture: each stream kept up to a cap, its start and its end.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::shell::{Sink, Stream};

/// One stream's bytes, at most `cap` of them: the first half, and a rolling last half.
pub(crate) struct Capture {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    half: usize,
    dropped: u64,
}

impl Capture {
    pub(crate) fn new(cap: usize) -> Self {
        Capture { head: Vec::new(), tail: Default::default(), half: cap / 2, dropped: 0 }
    }

    pub(crate) fn push(&mut self, mut data: &[u8]) {
        if self.head.len() < self.half {
            let n = (self.half - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if data.is_empty() {
            return;
        }
        self.tail.extend(data);
        if self.tail.len() > self.half {
            let excess = self.tail.len() - self.half;
            self.tail.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    /// The text, decoded as UTF-8 with replacement characters.
    pub(crate) fn text(&mut self) -> String {
        let tail = self.tail.make_contiguous();
        if self.dropped == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        format!(
            "{}\n... [{} bytes omitted: the output exceeded {} MiB] ...\n{}",
            String::from_utf8_lossy(&self.head),
            self.dropped,
            (self.half * 2) / (1024 * 1024),
            String::from_utf8_lossy(tail)
        )
    }
}

/// Reads a stream to its end into `capture`, handing each chunk to `sink` as it comes.
pub(crate) async fn read_into<R: AsyncRead + Unpin>(
    mut reader: R,
    capture: Arc<Mutex<Capture>>,
    done: CancellationToken,
    stream: Stream,
    sink: Option<Sink>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                capture.lock().unwrap().push(&buf[..n]);
                if let Some(s) = &sink {
                    s.0.output(stream, &buf[..n]);
                }
            }
        }
    }
    done.cancel();
}
