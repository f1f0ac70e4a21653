//! Windows: each command runs in a job object of its own, made with
//! `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`. Every process the command starts is in the job (no
//! breakaway is allowed), so a timeout or an abort ends all of them at once (`TerminateJobObject`),
//! and when this process ends, however it ends, the system closes its handles and so kills what
//! was left running: the Windows form of the owner guard (`guard.rs`).
//!
//! The command's first process is started suspended and put into the job before its thread runs,
//! so nothing it starts can be outside the job. A job is kept open while a process of it runs (a
//! server a command left running keeps running, as on Unix) and closed once it is empty.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};
use std::sync::Mutex;

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation,
    QueryInformationJobObject, SetInformationJobObject, TerminateJobObject, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{OpenThread, ResumeThread, THREAD_SUSPEND_RESUME};

/// A job object that kills its processes when its last handle closes.
pub(super) struct Job(OwnedHandle);

impl Job {
    /// A new job (its handle is not inherited by the command).
    pub(super) fn new() -> io::Result<Job> {
        // SAFETY: no attributes and no name; the handle returned is owned here.
        let h = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if h.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a valid handle just made, owned by nothing else.
        let job = Job(unsafe { OwnedHandle::from_raw_handle(h as RawHandle) });
        // SAFETY: a zeroed limit structure is valid; only the kill-on-close flag is set.
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: the structure and its size match the information class.
        let ok = unsafe {
            SetInformationJobObject(
                job.raw(),
                JobObjectExtendedLimitInformation,
                &info as *const _ as *const std::ffi::c_void,
                std::mem::size_of_val(&info) as u32,
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(job)
    }

    fn raw(&self) -> HANDLE {
        self.0.as_raw_handle() as HANDLE
    }

    /// Puts the suspended process (`process`, `pid`) into the job; its thread then runs.
    pub(super) fn adopt(&self, process: RawHandle, pid: u32) -> io::Result<()> {
        // SAFETY: both handles are valid for the call (the child is not reaped while suspended).
        let ok = unsafe { AssignProcessToJobObject(self.raw(), process as HANDLE) };
        let assigned = if ok == 0 { Err(io::Error::last_os_error()) } else { Ok(()) };
        // Resumed either way: a process that could not join runs as it would without a job.
        resume(pid);
        assigned
    }

    /// Ends every process in the job.
    pub(super) fn kill(&self) -> bool {
        // SAFETY: a valid job handle.
        unsafe { TerminateJobObject(self.raw(), 1) != 0 }
    }

    /// How many of its processes run now.
    fn active(&self) -> u32 {
        // SAFETY: a zeroed accounting structure is valid; its size matches the class.
        let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        let ok = unsafe {
            QueryInformationJobObject(
                self.raw(),
                JobObjectBasicAccountingInformation,
                &mut info as *mut _ as *mut std::ffi::c_void,
                std::mem::size_of_val(&info) as u32,
                std::ptr::null_mut(),
            )
        };
        // Unknown: kept, as if something ran.
        if ok == 0 {
            1
        } else {
            info.ActiveProcesses
        }
    }
}

/// The jobs of commands that left a process running: kept open (closing them would kill it) until
/// they are empty, and closed with this process.
static KEPT: Mutex<Vec<Job>> = Mutex::new(Vec::new());

/// Keeps `job` open while a process of it runs; closes the empty ones kept before.
pub(super) fn keep(job: Job) {
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    kept.retain(|j| j.active() > 0);
    if job.active() > 0 {
        kept.push(job);
    }
}

/// Resumes the threads of the suspended process `pid` (a new process has one).
pub(super) fn resume(pid: u32) {
    // SAFETY: a snapshot of threads; each entry is read into a structure of the size it says.
    unsafe {
        let snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
        if snap == INVALID_HANDLE_VALUE {
            return;
        }
        let mut entry: THREADENTRY32 = std::mem::zeroed();
        entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
        let mut more = Thread32First(snap, &mut entry) != 0;
        while more {
            if entry.th32OwnerProcessID == pid {
                let thread = OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID);
                if !thread.is_null() {
                    ResumeThread(thread);
                    CloseHandle(thread);
                }
            }
            more = Thread32Next(snap, &mut entry) != 0;
        }
        CloseHandle(snap);
    }
}
