//! Link options of the command line (the library crate and the Python extension have no
//! build script and keep the toolchain's defaults).
//!
//! A `dnnplace plan` of a 30-node graph is over in a few milliseconds, so process start-up
//! is a measurable share of it (README, "All eight published layer graphs at k = 8"). On
//! Linux with glibc:
//! - libstdc++ (HiGHS is C++) is linked statically into this package's binary and tests
//!   when the C++ compiler has `libstdc++.a`: the dynamic loader then neither maps it nor
//!   binds ≈ 1,700 symbol relocations at every start. Found by
//!   `c++ -print-file-name=libstdc++.a` (`$CXX` if set); without it the link stays as before
//!   (libstdc++.so).
//! - the binary only (`rustc-link-arg-bins`):
//!   - `-no-pie`: no relative relocations to apply at start (11,600) and no copy-on-write of
//!     the pages they touch; the price is a fixed load address for the binary's own code
//!     (its libraries keep ASLR);
//!   - `-z lazy`: a libc function is bound on its first call, not all of them at start
//!     (rustc's default `-z now` comes earlier on the command line; the last one counts);
//!   - `--wrap=__cxa_atexit`: the binary's C++ code registers its static destructors with
//!     `__wrap___cxa_atexit` (src/main.rs), which registers nothing.
//!
//! `dnnplace --version`: 2.9 -> 1.5 ms of CPU with src/main.rs's `_exit` and the deferred
//! clap commands; `plan` of ResNet-50 at k = 8: 5.4 -> 3.6 ms (`perf stat`, README).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CXX");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os != "linux" || env != "gnu" {
        return;
    }
    if let Some(dir) = static_libstdcxx_dir() {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=static=stdc++");
    }
    println!("cargo:rustc-link-arg-bins=-no-pie");
    println!("cargo:rustc-link-arg-bins=-Wl,-z,lazy");
    println!("cargo:rustc-link-arg-bins=-Wl,--wrap=__cxa_atexit");
}

/// The folder of the C++ compiler's `libstdc++.a`, if it has one.
fn static_libstdcxx_dir() -> Option<PathBuf> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = Command::new(cxx)
        .arg("-print-file-name=libstdc++.a")
        .output()
        .ok()?;
    // Without the file the compiler prints the bare name back.
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    if out.status.success() && path.is_absolute() && path.is_file() {
        path.parent().map(PathBuf::from)
    } else {
        None
    }
}
