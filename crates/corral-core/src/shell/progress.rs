//! `onProgress`: while a command runs, its output is gathered for `progressMs` at a time and
//! published as `{ toolCallId, stream, text }` events, in the order it came, one event per run of
//! output from one stream. A provider that cannot stream (a JS provider without `onOutput`, a
//! programmed stub) gets one event per stream when the command ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{OutputSink, Sink, Stream};
use crate::options::Callable;
use crate::redact::{stream::Stream as RedactStream, Redactor};

/// The default gathering time.
pub const PROGRESS_MS: u64 = 250;

/// How long the end of a run waits for its last events to be published.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

struct Gatherer {
    tx: mpsc::UnboundedSender<(Stream, Vec<u8>)>,
    streamed: AtomicBool,
}

impl OutputSink for Gatherer {
    fn output(&self, stream: Stream, chunk: &[u8]) {
        self.streamed.store(true, Ordering::Relaxed);
        let _ = self.tx.send((stream, chunk.to_vec()));
    }
}

/// One run's progress: a sink for the provider and the task that publishes.
pub struct Progress {
    gatherer: Option<Arc<Gatherer>>,
    task: tokio::task::JoinHandle<()>,
    listener: Arc<dyn Callable>,
    tool_call_id: Option<String>,
}

fn event(tool_call_id: &Option<String>, stream: Stream, text: &str) -> Value {
    json!({ "toolCallId": tool_call_id, "stream": stream.as_str(), "text": text })
}

/// Text of the complete UTF-8 sequences in `carry` + `bytes`; an incomplete one at the end stays
/// in `carry` for the next chunk.
fn decode(carry: &mut Vec<u8>, bytes: &[u8]) -> String {
    carry.extend_from_slice(bytes);
    let keep = match std::str::from_utf8(carry) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() => carry.len() - e.valid_up_to(),
        Err(_) => 0,
    };
    let rest = carry.split_off(carry.len() - keep);
    let text = String::from_utf8_lossy(carry).into_owned();
    *carry = rest;
    text
}

impl Progress {
    /// With `redact`, each stream's text is redacted as it comes, holding back only a tail that
    /// could still begin a secret (published when the run ends).
    pub fn start(
        listener: Arc<dyn Callable>,
        tool_call_id: Option<String>,
        every: Duration,
        redact: Option<(Arc<Redactor>, String)>,
    ) -> Progress {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Stream, Vec<u8>)>();
        let gatherer = Arc::new(Gatherer { tx, streamed: AtomicBool::new(false) });
        let (l, id) = (listener.clone(), tool_call_id.clone());
        let task = tokio::spawn(async move {
            let mut carry = [Vec::new(), Vec::new()];
            let mut redacting = redact.map(|(r, session)| [0, 1].map(|_| RedactStream::new(r.clone(), &session)));
            let mut open = true;
            while open {
                let Some(first) = rx.recv().await else { break };
                let mut batch = vec![first];
                let deadline = tokio::time::sleep(every);
                tokio::pin!(deadline);
                loop {
                    tokio::select! {
                        next = rx.recv() => match next {
                            Some(chunk) => batch.push(chunk),
                            None => { open = false; break; }
                        },
                        _ = &mut deadline => break,
                    }
                }
                // One event per run of one stream, in order.
                let mut runs: Vec<(Stream, String)> = Vec::new();
                for (stream, bytes) in batch {
                    let text = decode(&mut carry[stream as usize], &bytes);
                    match runs.last_mut() {
                        Some((s, t)) if *s == stream => t.push_str(&text),
                        _ => runs.push((stream, text)),
                    }
                }
                for (stream, text) in runs {
                    let text = match &mut redacting {
                        Some(r) => r[stream as usize].push(&text),
                        None => text,
                    };
                    if !text.is_empty() {
                        let _ = l.call(vec![event(&id, stream, &text)]).await;
                    }
                }
            }
            // What the redaction held back, once the output has ended.
            for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
                let rest = redacting.as_mut().map(|r| r[i].finish()).unwrap_or_default();
                if !rest.is_empty() {
                    let _ = l.call(vec![event(&id, stream, &rest)]).await;
                }
            }
        });
        Progress { gatherer: Some(gatherer), task, listener, tool_call_id }
    }

    /// The sink to hand the provider.
    pub fn sink(&self) -> Option<Sink> {
        self.gatherer.clone().map(|g| Sink(g as Arc<dyn OutputSink>))
    }

    /// After the command: publishes what is left (or, when nothing streamed, the whole output
    /// once per stream), then returns.
    pub async fn finish(mut self, stdout: &str, stderr: &str) {
        let streamed = self.gatherer.as_ref().is_some_and(|g| g.streamed.load(Ordering::Relaxed));
        self.gatherer = None;
        let _ = tokio::time::timeout(FLUSH_WAIT, &mut self.task).await;
        self.task.abort();
        if !streamed {
            for (stream, text) in [(Stream::Stdout, stdout), (Stream::Stderr, stderr)] {
                if !text.is_empty() {
                    let _ = self.listener.call(vec![event(&self.tool_call_id, stream, text)]).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_chunks_is_published_whole() {
        let mut carry = Vec::new();
        let e = "é".as_bytes();
        assert_eq!(decode(&mut carry, &[b'a', e[0]]), "a");
        assert_eq!(decode(&mut carry, &[e[1], b'b']), "éb");
        assert!(carry.is_empty());
    }
}
