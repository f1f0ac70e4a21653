//! The first line a command's wrapper writes on stdout before the command runs — its pid and
//! start time — taken off the output, and the script that kills the command's process group by
//! it. A kept Docker container and a Kubernetes pod both run commands this way: the line comes
//! before anything the command writes, so the command cannot forge it.

use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use crate::shell::exec::Capture;
use crate::shell::{Sink, Stream};

/// The lead line a wrapper starts with: its pid and start time (field 22 of its `stat`, counted
/// after the name, which may hold spaces and parentheses). A macro so a wrapper can be one
/// literal (`concat!`).
macro_rules! lead_line {
    () => {
        r#"echo $$ $(sed 's/.*) //' /proc/$$/stat 2>/dev/null | cut -d' ' -f20)"#
    };
}
pub(crate) use lead_line;

/// Prints the lead line, for a wrapper to start with.
pub(crate) const LEAD_LINE: &str = lead_line!();

/// The longest an abort waits for a started command's lead line.
const LEAD_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The first line of a command's stdout, written by corral's wrapper before the command runs.
#[derive(Default)]
pub(crate) struct Lead {
    line: Vec<u8>,
    done: bool,
    /// Cancelled once `done` is set.
    known: CancellationToken,
}

impl Lead {
    /// Takes the line off the front of `data`; returns what is left for the capture.
    pub(crate) fn take<'a>(&mut self, data: &'a [u8]) -> &'a [u8] {
        if self.done {
            return data;
        }
        match data.iter().position(|&b| b == b'\n') {
            Some(i) => {
                self.line.extend_from_slice(&data[..i]);
                self.done = true;
                self.known.cancel();
                &data[i + 1..]
            }
            None => {
                self.line.extend_from_slice(data);
                // A pid and a start time are a few digits: anything longer is not the wrapper's line.
                self.done = self.line.len() > 48;
                if self.done {
                    self.known.cancel();
                }
                &[]
            }
        }
    }

    /// The pid and start time the wrapper wrote, when it wrote them.
    pub(crate) fn pid(&self) -> Option<(u32, u64)> {
        if !self.done {
            return None;
        }
        let text = std::str::from_utf8(&self.line).ok()?;
        let (pid, start) = text.split_once(' ')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        (digits(pid) && digits(start)).then(|| Some((pid.parse().ok()?, start.parse().ok()?))).flatten()
    }
}

/// One piece of a command's output: on stdout the lead line is taken off first (when a lead is
/// kept); the rest goes to the stream's capture and to the caller's sink.
pub(crate) fn deliver(
    stream: Stream,
    data: &[u8],
    (out, err): (&Mutex<Capture>, &Mutex<Capture>),
    lead: Option<&Mutex<Lead>>,
    sink: Option<&Sink>,
) {
    let data = match (lead, stream) {
        (Some(l), Stream::Stdout) => l.lock().unwrap().take(data),
        _ => data,
    };
    if data.is_empty() {
        return;
    }
    match stream {
        Stream::Stderr => err.lock().unwrap().push(data),
        Stream::Stdout => out.lock().unwrap().push(data),
    }
    if let Some(s) = sink {
        s.0.output(stream, data);
    }
}

/// The lead's pid line, waited for until it was read or `ended` (then the wrapper never wrote
/// it, so the command never ran); a server that sends neither within `LEAD_WAIT` is given up on.
pub(crate) async fn wait(lead: &Mutex<Lead>, ended: &CancellationToken) -> Option<(u32, u64)> {
    let known = lead.lock().unwrap().known.clone();
    let _ = tokio::time::timeout(LEAD_WAIT, async {
        tokio::select! {
            _ = known.cancelled() => {}
            _ = ended.cancelled() => {}
        }
    })
    .await;
    lead.lock().unwrap().pid()
}

/// A script that kills the command a lead names with its process group: the leader still
/// running with that start time dies with its group; a leader gone leaves its group to kill (a
/// pid in use as a group id is not given out again); a pid that now names another process is
/// left alone. The start time is read after the name's last `)`: a command that names itself
/// with spaces does not shift it. `None` for pid 0 or 1 (init: the container itself). Written as dash, busybox and
/// bash all read it: `kill -9 -<pgid>`, never `kill -9 -- -<pgid>` (dash takes `--` for a pid).
pub(crate) fn kill_group_script((pid, start): (u32, u64)) -> Option<String> {
    (pid > 1).then(|| {
        format!(
            r#"s=$(sed 's/.*) //' /proc/{pid}/stat 2>/dev/null | cut -d' ' -f20); if [ -z "$s" ]; then kill -9 -{pid}; elif [ "$s" = {start} ]; then kill -9 -{pid} {pid}; fi"#
        )
    })
}
