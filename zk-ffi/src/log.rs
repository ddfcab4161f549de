//! Logging as Apache's client does it: a global level (`logLevel`, default INFO), a global stream
//! (stderr unless set), and a per-handle callback that takes precedence over the stream.
#![allow(non_upper_case_globals)]

use crate::abi::log_callback_fn;
use libc::{c_char, c_int, FILE};
use std::ffi::CStr;
use std::io::Write;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The log level programs read and write (ZooLogLevel: 1 error .. 4 debug; 0 silences).
#[no_mangle]
pub static mut logLevel: c_int = 3;

static STREAM: AtomicPtr<FILE> = AtomicPtr::new(std::ptr::null_mut());

extern "C" {
    static stderr: *mut FILE;
    fn zkrs_log_level() -> c_int;
    fn zkrs_set_log_level(level: c_int);
    fn zkrs_log_message_v();
}

/// Level names as the log lines print them.
const LEVELS: [&str; 5] = ["", "ERROR", "WARN", "INFO", "DEBUG"];
/// ERROR.
pub const ERROR: c_int = 1;
/// WARN.
pub const WARN: c_int = 2;
/// INFO.
pub const INFO: c_int = 3;

/// The current level, read where the application may have written it.
pub fn level() -> c_int {
    // SAFETY: a plain int read through the C shim.
    unsafe { zkrs_log_level() }
}

/// Sets the log level: 0 turns logging off, other values are clamped to ERROR..DEBUG.
#[no_mangle]
pub extern "C" fn zoo_set_debug_level(level: c_int) {
    let l = if level == 0 { 0 } else { level.clamp(1, 4) };
    // SAFETY: a plain int write through the C shim.
    unsafe { zkrs_set_log_level(l) };
}

/// Sets the stream log lines go to when a handle has no callback; NULL means stderr.
#[no_mangle]
pub extern "C" fn zoo_set_log_stream(stream: *mut FILE) {
    STREAM.store(stream, Ordering::Release);
}

/// The stream log lines go to (stderr unless set).
#[no_mangle]
pub extern "C" fn zoo_get_log_stream() -> *mut FILE {
    let s = STREAM.load(Ordering::Acquire);
    if s.is_null() {
        // SAFETY: reading libc's stderr pointer.
        unsafe { stderr }
    } else {
        s
    }
}

/// `log_message(callback, level, line, func, format, ...)`: the C-variadic entry point. Defined as
/// a jump to the C shim, which formats the arguments and calls [`zkrs_log_emit`].
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn log_message() {
    core::arch::naked_asm!("jmp {}", sym zkrs_log_message_v)
}

fn thread_id() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    (unsafe { libc::pthread_self() }) as u64
}

fn timestamp() -> String {
    let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
    // SAFETY: tv and tm are valid out-pointers.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe {
        libc::gettimeofday(&mut tv, std::ptr::null_mut());
        libc::localtime_r(&tv.tv_sec, &mut tm);
    }
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02},{:03}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        tv.tv_usec / 1000
    )
}

/// Writes one formatted log line to the callback if there is one, else to the stream.
pub fn emit(callback: log_callback_fn, lvl: c_int, line: c_int, func: &str, message: &str) {
    let name = LEVELS.get(lvl.clamp(0, 4) as usize).copied().unwrap_or("");
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let text =
        format!("{}:{}(0x{:x}):ZOO_{}@{}@{}: {}", timestamp(), pid, thread_id(), name, func, line, message);
    let Ok(c) = std::ffi::CString::new(text.replace('\0', " ")) else { return };
    match callback {
        // SAFETY: the application's callback takes a NUL-terminated string valid for the call.
        Some(cb) => unsafe { cb(c.as_ptr()) },
        None => {
            let stream = zoo_get_log_stream();
            // SAFETY: stream is a FILE* the application gave us (or stderr).
            unsafe {
                libc::fputs(c.as_ptr(), stream);
                libc::fputc(b'\n' as c_int, stream);
                libc::fflush(stream);
            }
        }
    }
}

/// Logs from inside the library when `lvl` is enabled.
pub fn log(callback: log_callback_fn, lvl: c_int, func: &str, message: std::fmt::Arguments<'_>) {
    if lvl <= level() {
        let mut s = Vec::new();
        let _ = s.write_fmt(message);
        emit(callback, lvl, 0, func, &String::from_utf8_lossy(&s));
    }
}

/// Called by the C shim with the formatted message.
///
/// # Safety
/// `func` and `message` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn zkrs_log_emit(
    callback: log_callback_fn,
    lvl: c_int,
    line: c_int,
    func: *const c_char,
    message: *const c_char,
) {
    if message.is_null() {
        return;
    }
    // SAFETY: caller contract.
    let msg = unsafe { CStr::from_ptr(message) }.to_string_lossy();
    let f = if func.is_null() {
        std::borrow::Cow::Borrowed("")
    } else {
        // SAFETY: caller contract.
        unsafe { CStr::from_ptr(func) }.to_string_lossy()
    };
    emit(callback, lvl, line, &f, &msg);
}
