//! A command's output as it is read from a container's attached streams (and its input written
//! there), for both `reuse` modes.

use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::super::SandboxRequest;
use super::engine::{Attached, Demux};
use crate::sandbox::lead::Lead;
use crate::shell::exec::{Capture, MAX_CAPTURE_BYTES};

/// A command's output as it is read from its attached streams.
pub(super) struct Streams {
    pub out: Arc<Mutex<Capture>>,
    pub err: Arc<Mutex<Capture>>,
    /// Cancelled when the streams end.
    pub done: CancellationToken,
    /// In a kept container, the wrapper's first stdout line (its pid), taken off the output.
    pub lead: Option<Arc<Mutex<Lead>>>,
}

impl Streams {
    /// Empty captures of at most `cap` bytes each (`MAX_CAPTURE_BYTES` when `None`).
    pub(super) fn new(cap: Option<usize>) -> Self {
        let cap = cap.unwrap_or(MAX_CAPTURE_BYTES);
        Streams {
            out: Arc::new(Mutex::new(Capture::new(cap))),
            err: Arc::new(Mutex::new(Capture::new(cap))),
            done: CancellationToken::new(),
            lead: None,
        }
    }

    /// Takes the first stdout line off as the wrapper's (`session.rs`).
    pub(super) fn with_lead(mut self) -> Self {
        self.lead = Some(Default::default());
        self
    }

    /// The pid and start time the wrapper wrote, when it wrote them.
    #[cfg(test)]
    pub(super) fn lead_pid(&self) -> Option<(u32, u64)> {
        self.lead.as_ref()?.lock().unwrap().pid()
    }

    /// The wrapper's pid line, waited for until it was read or the streams ended.
    pub(super) async fn wait_lead_pid(&self) -> Option<(u32, u64)> {
        crate::sandbox::lead::wait(self.lead.as_ref()?, &self.done).await
    }

    /// Reads them (and writes the request's stdin, or its input as it comes) on a task of its own.
    pub(super) fn read(&self, attached: Attached, req: &SandboxRequest) -> tokio::task::JoinHandle<()> {
        let input = if req.stdin.is_none() { req.input.as_ref().and_then(|i| i.take()) } else { None };
        tokio::spawn(read_attached(
            attached,
            req.stdin.clone(),
            input,
            self.out.clone(),
            self.err.clone(),
            self.done.clone(),
            req.on_output.clone(),
            self.lead.clone(),
        ))
    }
}

/// Reads the attached streams into the captures; `done` when they end.
#[allow(clippy::too_many_arguments)]
async fn read_attached(
    attached: Attached,
    stdin: Option<String>,
    input: Option<tokio::sync::mpsc::Receiver<Vec<u8>>>,
    out: Arc<Mutex<Capture>>,
    err: Arc<Mutex<Capture>>,
    done: CancellationToken,
    on_output: Option<crate::shell::Sink>,
    lead: Option<Arc<Mutex<Lead>>>,
) {
    use crate::shell::Stream;
    let mut demux = Demux::default();
    let mut sink = |stream: u8, data: &[u8]| {
        let stream = if matches!(stream, 2 | 3) { Stream::Stderr } else { Stream::Stdout };
        crate::sandbox::lead::deliver(stream, data, (&out, &err), lead.as_deref(), on_output.as_ref());
    };
    match attached {
        Attached::Raw(io) => {
            let (mut rd, mut wr) = tokio::io::split(io);
            let writer = tokio::spawn(async move {
                if let Some(text) = stdin {
                    let _ = wr.write_all(text.as_bytes()).await;
                } else if let Some(mut rx) = input {
                    while let Some(chunk) = rx.recv().await {
                        if wr.write_all(&chunk).await.is_err() || wr.flush().await.is_err() {
                            break;
                        }
                    }
                }
                // Half-closes the connection: the container's stdin sees its end.
                let _ = wr.shutdown().await;
                // Keeps the write half (and so the connection) alive until the read half ends.
                std::future::pending::<()>().await;
            });
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match rd.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => demux.push(&buf[..n], &mut sink),
                }
            }
            writer.abort();
        }
        Attached::Body(mut body) => {
            while let Some(frame) = body.frame().await {
                match frame {
                    Ok(f) => {
                        if let Some(data) = f.data_ref() {
                            demux.push(data, &mut sink);
                        }
                    }
                    Err(_) => break,
                }
            }
        }
    }
    done.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_abort_waits_for_the_pid_line_that_is_still_on_its_way() {
        let s = Streams::new(None).with_lead();
        assert_eq!(s.lead_pid(), None);
        let lead = s.lead.clone().unwrap();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let rest = lead.lock().unwrap().take(b"12 34\nrest").to_vec();
            assert_eq!(rest, b"rest");
        });
        assert_eq!(s.wait_lead_pid().await, Some((12, 34)));
    }

    #[tokio::test]
    async fn streams_that_end_without_the_line_mean_no_command_ran() {
        let s = Streams::new(None).with_lead();
        let done = s.done.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            done.cancel();
        });
        let waited = tokio::time::timeout(std::time::Duration::from_secs(10), s.wait_lead_pid()).await;
        assert_eq!(waited, Ok(None));
    }
}
