//! The `dnnplace` binary: the command line ([`cli`]) over the `dnnplace` library.
//!
//! The library's rooms are re-exported at this crate's root so that the command line names
//! them as the library does (`crate::solve::…`); the command line adds no model, solver or
//! renderer of its own, only flags, their validation and the commands that chain the
//! library's steps.
//!
//! **How the process ends.** Once the command has run (its files written and closed, every
//! value dropped), the buffered output is flushed — Rust's standard output, then every C
//! stdio stream (HiGHS prints through them) — and the process ends with `_exit`, running no
//! `atexit` handler. The only ones were the C++ static destructors: HiGHS has one per global
//! string (about 5,200), running them was 14 % of `dnnplace --version`'s instructions and
//! registering them as much again (callgrind), and they only free memory the process is
//! about to give back. They are not even registered: see [`__wrap___cxa_atexit`].

mod cli;

pub(crate) use dnnplace::{
    costmodel, experiments, export, io, model, report, score, simulate, solve,
};

fn main() {
    let status = cli::main();
    exit_without_destructors(status)
}

/// Flushes the output and ends the process with `status`, skipping `atexit` handlers.
fn exit_without_destructors(status: u8) -> ! {
    use std::io::Write;
    // A flush that fails (a closed pipe) loses nothing more than `exit` would have.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: fflush(NULL) flushes every open C output stream; _exit ends the process. No
    // Rust value is alive past this point that needs dropping (cli::main has returned).
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(i32::from(status))
    }
}

/// `__cxa_atexit` as the binary's C++ code (HiGHS, the static libstdc++) calls it, through
/// the linker's `--wrap=__cxa_atexit` (build.rs): registers nothing and reports success.
/// Those registrations are static objects' destructors, which never run here: the process
/// ends with `_exit` ([`exit_without_destructors`]) or, on a panic, with nothing of theirs
/// left to flush (C stdio is flushed by `exit` itself, not by a registered handler).
/// Registering them cost over 5,000 calls and 200 KB of heap at every start.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[no_mangle]
extern "C" fn __wrap___cxa_atexit(
    _destructor: Option<unsafe extern "C" fn(*mut libc::c_void)>,
    _object: *mut libc::c_void,
    _dso: *mut libc::c_void,
) -> libc::c_int {
    0
}
