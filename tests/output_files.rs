//! `--out` of every command, through the binary: only regular files are replaced, new files
//! get the umask's mode, replaced files keep theirs, a failed run leaves the old file.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dnnplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
        .args(args)
        .output()
        .unwrap()
}

fn corpus(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(rel)
        .to_str()
        .unwrap()
        .to_string()
}

fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    u32::from_str_radix(
        status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .unwrap()
            .trim(),
        8,
    )
    .unwrap()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

fn refused(run: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(
        err.contains("refusing to replace it") && err.contains(needle),
        "{err}"
    );
}

/// Every command with `--out`, writing to `out`.
fn writers(out: &str) -> Vec<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        s(&["plan", &corpus("workload/ok.json"), "--out", out]),
        s(&["import", &corpus("onnx/ok.onnx"), "--out", out]),
        s(&[
            "generate",
            "transformer",
            "--layers",
            "1",
            "--hidden",
            "8",
            "--heads",
            "2",
            "--vocab",
            "16",
            "--out",
            out,
        ]),
        s(&["reproduce", "/nonexistent/workloads", "--out", out]),
    ]
}

#[test]
fn new_files_get_the_umask_mode_and_replaced_files_keep_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan.json");
    let run = dnnplace(&[
        "plan",
        &corpus("workload/ok.json"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        mode(&out),
        0o666 & !umask(),
        "a new file gets 0666 minus the umask"
    );
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
    let run = dnnplace(&[
        "import",
        &corpus("onnx/ok.onnx"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(mode(&out), 0o640);
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("maxSizePerFPGA"));
    // Nothing else is left in the folder (no temporary file).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn every_writer_refuses_a_fifo_a_socket_a_folder_and_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let sock = dir.path().join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let null = dir.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    let folder = dir.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    for (target, kind) in [
        (&fifo, "FIFO"),
        (&sock, "socket"),
        (&null, "character device"),
        (&folder, "directory"),
    ] {
        for args in writers(target.to_str().unwrap()) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            // reproduce refuses before it looks at its (absent) input folder.
            refused(&dnnplace(&args), kind);
        }
    }
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(std::fs::symlink_metadata(&sock)
        .unwrap()
        .file_type()
        .is_socket());
    assert!(std::fs::symlink_metadata(&null)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    assert!(folder.is_dir() && std::fs::read_dir(&folder).unwrap().next().is_none());
}

/// A real character device node (needs root or CAP_MKNOD; skipped, saying so, without).
#[test]
fn a_character_device_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let dev: PathBuf = dir.path().join("null-device");
    let c = std::ffi::CString::new(dev.to_str().unwrap()).unwrap();
    // SAFETY: a valid path; makedev(1, 3) is /dev/null's device number.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) } == 0;
    if !made {
        eprintln!("SKIPPED: mknod is not permitted here");
        return;
    }
    refused(
        &dnnplace(&[
            "plan",
            &corpus("workload/ok.json"),
            "--out",
            dev.to_str().unwrap(),
        ]),
        "character device",
    );
    assert!(std::fs::symlink_metadata(&dev)
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn a_failed_run_leaves_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan.json");
    std::fs::write(&out, "the previous plan\n").unwrap();
    let run = dnnplace(&[
        "plan",
        &corpus("workload/fits_no_device.json"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "the previous plan\n"
    );
    let run = dnnplace(&[
        "plan",
        &corpus("workload/ok.json"),
        "--out",
        dir.path().join("no/such/folder/p.json").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains("does not exist"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
