//! One `pods/exec` over WebSocket (`v5.channel.k8s.io`, with v4 as the fallback the client
//! offers): argv as the exec's `command` (never shell text of ours), stdin written then closed
//! (v5's close frame), stdout and stderr handed on as they arrive, and the exit code from the
//! status channel. A connection the server drops before the status is an error, never a hang.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::client::Connection;
use crate::error::{Code, Error, Result};
use crate::shell::Stream;

/// Each stream's buffer between the connection and its reader.
const STREAM_BUFFER: usize = 256 * 1024;
/// How long the readers may still drain once the connection ended.
const DRAIN: Duration = Duration::from_millis(500);

/// What the command reads.
pub(crate) enum Stdin {
    None,
    /// Written, then closed.
    Bytes(Vec<u8>),
    /// Written and left open: for a command that reads a length it was told, which then works on
    /// a v4 server too (where closing stdin closes the whole connection).
    Counted(Vec<u8>),
    Channel(tokio::sync::mpsc::Receiver<Vec<u8>>),
}

/// Where output goes as it arrives.
pub(crate) type OnData = Arc<Mutex<dyn FnMut(Stream, &[u8]) + Send>>;

/// A started exec.
pub(crate) struct Exec {
    task: tokio::task::JoinHandle<Result<i32>>,
    /// The tasks that read its output and write its input: stopped with it (a reader of a
    /// connection that was dropped would otherwise wait forever).
    helpers: Vec<tokio::task::AbortHandle>,
    /// What `finish` found, once it found it: it may be asked again (a task is polled once).
    ended: Option<Result<i32>>,
}

impl Exec {
    /// The exit code, once the command ended (or an error when the connection ended without it).
    /// Cancel-safe, and may be called again after it returned.
    pub(crate) async fn finish(&mut self) -> Result<i32> {
        if let Some(r) = &self.ended {
            return r.clone();
        }
        let r = match (&mut self.task).await {
            Ok(r) => r,
            Err(_) => Err(Error::new(Code::Io, "KubernetesSandbox: the exec was stopped.")),
        };
        self.ended = Some(r.clone());
        r
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        self.task.abort();
        for h in &self.helpers {
            h.abort();
        }
    }
}

/// The error of an exec whose pod is gone: its claim expired (`shutdownTime`) or was deleted.
/// `NotFound` from an exec means this, never a file.
pub(crate) fn pod_gone(pod: &str) -> Error {
    Error::new(
        Code::NotFound,
        format!(
            "KubernetesSandbox: pod {pod} is gone (its claim expired or was deleted); the next call claims a new sandbox, without this one's files."
        ),
    )
}

/// The exit code a `Status` from channel 3 gives: `Success` is 0; `NonZeroExitCode` carries it
/// in its `ExitCode` cause; anything else is the exec failing, with the server's message.
fn exit_code(status: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Status) -> Result<i32> {
    if status.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    if status.reason.as_deref() == Some("NonZeroExitCode") {
        let code = status
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .and_then(|causes| causes.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.trim().parse::<i32>().ok());
        if let Some(code) = code {
            return Ok(code);
        }
    }
    Err(Error::new(
        Code::Io,
        format!(
            "KubernetesSandbox: the exec failed: {}",
            super::client::scrub(status.message.as_deref().unwrap_or("the API server gave no reason"))
        ),
    ))
}

/// Starts `argv` in the pod's `container` (its first when `None`).
pub(crate) async fn start(
    c: &Connection,
    pod: &str,
    container: Option<&str>,
    argv: Vec<String>,
    stdin: Stdin,
    on_data: OnData,
) -> Result<Exec> {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &c.namespace);
    let mut params = AttachParams::default().stdin(!matches!(stdin, Stdin::None)).stdout(true).stderr(true);
    if let Some(name) = container {
        params = params.container(name);
    }
    params.max_stdin_buf_size = Some(STREAM_BUFFER);
    params.max_stdout_buf_size = Some(STREAM_BUFFER);
    params.max_stderr_buf_size = Some(STREAM_BUFFER);
    let mut attached = match pods.exec(pod, argv, &params).await {
        Ok(a) => a,
        Err(kube::Error::Api(s)) if s.code == 404 => return Err(pod_gone(pod)),
        Err(e) => return Err(super::claim::api_error(c, &format!("starting a command in pod {pod}"), e)),
    };
    let writer = attached.stdin();
    let readers: Vec<_> = [(Stream::Stdout, attached.stdout()), (Stream::Stderr, attached.stderr())]
        .into_iter()
        .filter_map(|(stream, r)| r.map(|r| (stream, r)))
        .map(|(stream, mut r)| {
            let on_data = on_data.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match r.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => (on_data.lock().unwrap())(stream, &buf[..n]),
                    }
                }
            })
        })
        .collect();
    let status = attached.take_status();
    let input = writer.map(|mut w| {
        tokio::spawn(async move {
            match stdin {
                Stdin::None => {}
                Stdin::Bytes(bytes) => {
                    let _ = w.write_all(&bytes).await;
                }
                Stdin::Counted(bytes) => {
                    let _ = w.write_all(&bytes).await;
                    let _ = w.flush().await;
                    // Kept open until the exec ends (this task is then stopped).
                    std::future::pending::<()>().await;
                }
                Stdin::Channel(mut rx) => {
                    while let Some(chunk) = rx.recv().await {
                        if w.write_all(&chunk).await.is_err() {
                            break;
                        }
                    }
                }
            }
            // Dropping the writer sends nothing: shutting it down sends v5's close of stdin.
            let _ = w.shutdown().await;
        })
    });
    let mut helpers: Vec<_> = readers.iter().map(|r| r.abort_handle()).collect();
    helpers.extend(input.as_ref().map(|i| i.abort_handle()));
    let task = tokio::spawn(async move {
        // The status first: `join` half-closes a stdin that was never asked for, which on v4
        // closes the whole connection. The status future ends (empty) when the connection does.
        let status = match status {
            Some(s) => s.await,
            None => None,
        };
        let joined = attached.join().await;
        // The connection ended: what the readers still hold drains; a reader the client left
        // open after a failed connection is stopped.
        for r in readers {
            let abort = r.abort_handle();
            if tokio::time::timeout(DRAIN, r).await.is_err() {
                abort.abort();
            }
        }
        if let Some(i) = input {
            i.abort();
        }
        match (status, joined) {
            (Some(s), _) => exit_code(&s),
            (None, Err(e)) => Err(Error::new(
                Code::Io,
                format!(
                    "KubernetesSandbox: the connection to the API server ended before the command finished: {}",
                    super::client::scrub(&e.to_string())
                ),
            )),
            (None, Ok(())) => Err(Error::new(
                Code::Io,
                "KubernetesSandbox: the API server closed the exec stream before the command finished.",
            )),
        }
    });
    Ok(Exec { task, helpers, ended: None })
}

/// Runs `argv` to its end and returns its exit code, stdout and stderr (each up to `limit` bytes;
/// more is an error, so a caller never takes a cut file for the whole).
pub(crate) async fn collect(
    c: &Connection,
    pod: &str,
    container: Option<&str>,
    argv: Vec<String>,
    stdin: Stdin,
    limit: usize,
) -> Result<(i32, Vec<u8>, Vec<u8>)> {
    #[derive(Default)]
    struct Both {
        out: Vec<u8>,
        err: Vec<u8>,
        over: bool,
    }
    let both = Arc::new(Mutex::new(Both::default()));
    let b = both.clone();
    let on_data: OnData = Arc::new(Mutex::new(move |stream: Stream, data: &[u8]| {
        let mut b = b.lock().unwrap();
        let held = if stream == Stream::Stdout { b.out.len() } else { b.err.len() };
        if held + data.len() > limit {
            b.over = true;
        } else if stream == Stream::Stdout {
            b.out.extend_from_slice(data);
        } else {
            b.err.extend_from_slice(data);
        }
    }));
    let mut exec = start(c, pod, container, argv, stdin, on_data).await?;
    let code = exec.finish().await?;
    let mut b = both.lock().unwrap();
    if b.over {
        return Err(Error::new(Code::TooLarge, format!("KubernetesSandbox: the output passed {limit} bytes.")));
    }
    Ok((code, std::mem::take(&mut b.out), std::mem::take(&mut b.err)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

    fn failure(reason: &str, cause: Option<(&str, &str)>) -> Status {
        Status {
            status: Some("Failure".into()),
            reason: Some(reason.into()),
            message: Some("command terminated with non-zero exit code".into()),
            details: cause.map(|(r, m)| StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some(r.into()),
                    message: Some(m.into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_exit_code_comes_from_the_status_channel() {
        assert_eq!(exit_code(&Status { status: Some("Success".into()), ..Default::default() }).unwrap(), 0);
        assert_eq!(exit_code(&failure("NonZeroExitCode", Some(("ExitCode", "3")))).unwrap(), 3);
        assert_eq!(exit_code(&failure("NonZeroExitCode", Some(("ExitCode", "137")))).unwrap(), 137);
    }

    #[test]
    fn a_failure_without_an_exit_code_is_the_exec_failing_with_the_servers_message() {
        let e = exit_code(&failure("InternalError", None)).unwrap_err();
        assert_eq!(e.code, Code::Io);
        assert!(e.message.contains("non-zero exit code"), "{}", e.message);
        assert!(exit_code(&failure("NonZeroExitCode", Some(("ExitCode", "x")))).is_err());
    }
}
