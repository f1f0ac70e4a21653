//! Starting a command that must join a control group before it runs, without forking this
//! process. A fork copies the page tables of Node (tens of megabytes mapped), most of what a
//! short command costs; `posix_spawn` avoids the copy but cannot run a step in the child, and
//! joining the group after the start would let the command fork out of it first. So the child is
//! made as `posix_spawn` makes it, `clone(CLONE_VM | CLONE_VFORK)`: it runs on its own stack in
//! this process's memory, this thread waits until it execs, and it makes only raw system calls
//! on values prepared here: signal dispositions back to the defaults, the signal mask cleared, its
//! own process group, the group joined, its directory, its standard streams, then `execve`.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

/// The child's started command: its pid, the parent's ends of its pipes, a future of its wait
/// status, and a kill that never reaches another process (a pidfd).
pub struct Spawned {
    pub pid: u32,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub exit: std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<i32>> + Send>>,
    pub kill: Arc<dyn Fn() + Send + Sync>,
}

/// What the child reads (all prepared before the clone) and where it writes why it failed.
struct Args {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    procs: *const libc::c_char,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    errno: AtomicI32,
}

/// The child, until its exec. Raw calls only: it shares this process's memory and runs while
/// the thread that made it waits.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Args` the parent keeps alive until this child has exec'd or exited;
    // every pointer in it is a NUL-terminated string or a NULL-terminated array that outlives it.
    unsafe {
        let a = &*(arg as *const Args);
        let fail = || -> libc::c_int {
            a.errno.store(*libc::__errno_location(), Ordering::SeqCst);
            libc::_exit(127)
        };
        // The parent's handlers must never run here: every handled signal back to its default;
        // SIGPIPE and SIGXFSZ too (Node ignores them, and an ignored signal stays ignored across
        // exec: a broken pipe or a file size limit would not stop the command).
        for sig in 1..65 {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && (old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN
                    || sig == libc::SIGPIPE
                    || sig == libc::SIGXFSZ)
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        if libc::setpgid(0, 0) < 0 {
            return fail();
        }
        let group = libc::open(a.procs, libc::O_WRONLY | libc::O_CLOEXEC);
        if group < 0 || libc::write(group, b"0".as_ptr().cast(), 1) != 1 {
            return fail();
        }
        libc::close(group);
        if libc::chdir(a.cwd) < 0 {
            return fail();
        }
        let stdin =
            if a.stdin >= 0 { a.stdin } else { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if stdin < 0 || libc::dup2(stdin, 0) < 0 || libc::dup2(a.stdout, 1) < 0 || libc::dup2(a.stderr, 2) < 0 {
            return fail();
        }
        libc::execve(a.program, a.argv, a.envp);
        fail()
    }
}

/// Reaps the child when its exit future is dropped before it did (the caller gave up on the
/// command, whose group is then killed): no zombie is left for the life of this process.
struct Reaper {
    pid: libc::pid_t,
    done: bool,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if !self.done {
            let pid = self.pid;
            // SAFETY: waits for our own child, which nothing else reaps.
            let _ = std::thread::Builder::new()
                .name("corral-reap".into())
                .spawn(move || unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) });
        }
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut p = [-1; 2];
    // SAFETY: a two-element array.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: descriptors pipe2 just made.
    Ok(unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) })
}

fn cstr(b: &[u8]) -> std::io::Result<CString> {
    CString::new(b).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte"))
}

/// Starts `program -c command` in `cwd` with exactly `env`, as the leader of its own process
/// group, after it joined the control group whose `cgroup.procs` is `procs`.
pub fn spawn_in_group(
    program: &Path,
    command: &str,
    cwd: &Path,
    env: &BTreeMap<String, String>,
    with_stdin: bool,
    procs: &CStr,
) -> std::io::Result<Spawned> {
    let program = cstr(program.as_os_str().as_bytes())?;
    let argv = [cstr(b"sh")?, cstr(b"-c")?, cstr(command.as_bytes())?];
    let envs = env.iter().map(|(k, v)| cstr(format!("{k}={v}").as_bytes())).collect::<std::io::Result<Vec<_>>>()?;
    let cwd = cstr(cwd.as_os_str().as_bytes())?;
    let argv_p: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).chain([std::ptr::null()]).collect();
    let envp: Vec<*const libc::c_char> = envs.iter().map(|a| a.as_ptr()).chain([std::ptr::null()]).collect();
    let stdin = if with_stdin { Some(pipe()?) } else { None };
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let args = Args {
        program: program.as_ptr(),
        argv: argv_p.as_ptr(),
        envp: envp.as_ptr(),
        cwd: cwd.as_ptr(),
        procs: procs.as_ptr(),
        stdin: stdin.as_ref().map_or(-1, |(r, _)| r.as_raw_fd()),
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        errno: AtomicI32::new(0),
    };
    let mut stack = vec![0u8; 64 * 1024];
    // The stack grows down from its (16-byte aligned) top.
    let top = ((stack.as_mut_ptr() as usize + stack.len()) & !15) as *mut libc::c_void;
    // SAFETY: every signal is blocked in this thread while the child shares its memory (it unblocks
    // them once its dispositions are the defaults); the clone returns once the child exec'd or
    // exited, so `args`, the strings and the stack outlive its use of them.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &args as *const Args as *mut libc::c_void,
        );
        let e = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(e);
        }
        pid
    };
    drop(stack);
    let failed = args.errno.load(Ordering::SeqCst);
    if failed != 0 {
        // SAFETY: reaps our own child, which has exited.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        return Err(std::io::Error::from_raw_os_error(failed));
    }
    // SAFETY: a raw syscall on our own unreaped child; the descriptor is owned at once.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: our own child: killed and reaped.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        return Err(e);
    }
    // SAFETY: a descriptor pidfd_open just made.
    let pidfd = Arc::new(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    drop((out_w, err_w));
    let stdin = stdin.map(|(r, w)| {
        drop(r);
        w
    });
    let waited = pidfd.clone();
    let reaper = Reaper { pid, done: false };
    let exit = Box::pin(async move {
        // The whole guard moves into the future (dropped with it, polled or not).
        let mut reaper = reaper;
        // SAFETY: the pidfd is owned by the Arc the AsyncFd holds: open, and the same, while it lives.
        let ready = unsafe { tokio::io::unix::AsyncFd::register_with_interest(waited, tokio::io::Interest::READABLE) }?;
        let _ = ready.readable().await?;
        let mut status = 0;
        loop {
            // SAFETY: reaps our own child, which has ended (its pidfd is readable).
            if unsafe { libc::waitpid(pid, &mut status, 0) } >= 0 {
                reaper.done = true;
                return Ok(status);
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    });
    let kill = Arc::new(move || {
        // SAFETY: a signal through a pidfd: it reaches this child or nothing (once reaped, ESRCH).
        unsafe { libc::syscall(libc::SYS_pidfd_send_signal, pidfd.as_raw_fd(), libc::SIGKILL, 0usize, 0u32) };
    });
    Ok(Spawned { pid: pid as u32, stdin, stdout: out_r, stderr: err_r, exit, kill })
}
