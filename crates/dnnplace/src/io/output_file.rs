//! Output files (`--out` of every command): atomic, only over regular files, with the mode
//! a user expects.
//!
//! [`write_atomically`]`(path, contents)`:
//! 1. [`check_output_target`]: its folder must exist, and when `path` exists (symbolic
//!    links followed) it must be a regular file. A directory, FIFO, socket, character or block device is refused: the
//!    rename below would replace the device node or FIFO itself with a regular file (as
//!    root, `--out /dev/null` would delete `/dev/null`), which no one means by "write the
//!    plan to this file". A link to nowhere is refused too.
//! 2. A link to a regular file stays a link: the file it points to is the one replaced.
//! 3. A temporary file is created beside the target (same folder, hence same file system),
//!    with mode `0666` minus the umask — exactly the mode of any new file the user creates —
//!    or, when replacing a file, that file's mode (and owner and group where the process
//!    may set them).
//! 4. The contents are written and flushed to disk, and the temporary file is renamed over
//!    the target (atomic on POSIX: a reader sees the old file or the new one, never half of
//!    one); the folder is then flushed, best effort.
//!
//! A failure at any step removes the temporary file and leaves the old file untouched.
//! Between the check and the rename another process could still put something else at
//! `path`; the check is for mistakes, not for adversaries sharing the folder.

use std::io::Write;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::IoError;

fn refuse(path: &Path, message: String) -> IoError {
    IoError::InFile {
        path: path.display().to_string(),
        message,
    }
}

/// What a non-regular file is, for the message.
fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Checks that `path` may be replaced by an output file: absent, or a regular file (through
/// symbolic links), in a folder that exists. Commands call it before long work so that a
/// bad `--out` fails at once.
pub fn check_output_target(path: &Path) -> Result<(), IoError> {
    let (target, _) = resolve_target(path)?;
    folder_of(path, &target).map(|_| ())
}

/// The folder `target` goes into, which must exist.
fn folder_of<'a>(path: &Path, target: &'a Path) -> Result<&'a Path, IoError> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(refuse(
            path,
            format!("the folder {} does not exist", dir.display()),
        ));
    }
    Ok(dir)
}

/// The path to replace and, when it exists, its metadata.
fn resolve_target(path: &Path) -> Result<(PathBuf, Option<std::fs::Metadata>), IoError> {
    let refuse_kind = |t| {
        refuse(
            path,
            format!(
                "refusing to replace it: it is {}, not a regular file (give a file name for --out)",
                kind_of(t)
            ),
        )
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {
            let real = std::fs::canonicalize(path).map_err(|source| IoError::File {
                path: path.display().to_string(),
                source,
            })?;
            Ok((real, Some(m)))
        }
        Ok(m) => Err(refuse_kind(m.file_type())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::symlink_metadata(path)
        {
            Ok(link) if link.file_type().is_symlink() => {
                let to = std::fs::read_link(path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "?".into());
                Err(refuse(
                    path,
                    format!("refusing to write through a symbolic link to a missing file ({to})"),
                ))
            }
            _ => Ok((path.to_path_buf(), None)),
        },
        Err(source) => Err(IoError::File {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// Writes `contents` to `path` atomically (module documentation).
pub fn write_atomically(path: &Path, contents: &str) -> Result<(), IoError> {
    let err = |source| IoError::File {
        path: path.display().to_string(),
        source,
    };
    let (target, existing) = resolve_target(path)?;
    let dir = folder_of(path, &target)?;
    let name = target
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let mode = existing
        .as_ref()
        .map_or(0o666, |m| m.permissions().mode() & 0o7777);
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(err)?;
    if let Some(m) = &existing {
        use std::os::unix::fs::MetadataExt;
        // Best effort: only root may give a file away; the mode is set after the owner
        // because a change of owner may clear the set-id bits.
        let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(m.uid()), Some(m.gid()));
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(err)?;
    }
    tmp.write_all(contents.as_bytes()).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(&target).map_err(|e| err(e.error))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    /// The process umask (Linux reports it in /proc/self/status; setting it to read it
    /// would race with other tests creating files).
    fn umask() -> u32 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .expect("Umask line");
        u32::from_str_radix(line.trim(), 8).unwrap()
    }

    #[test]
    fn new_files_get_the_umask_mode_and_replaced_files_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.json");
        write_atomically(&new, "1").unwrap();
        assert_eq!(mode(&new), 0o666 & !umask());
        let old = dir.path().join("old.json");
        std::fs::write(&old, "old").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomically(&old, "new").unwrap();
        assert_eq!(
            (mode(&old), std::fs::read_to_string(&old).unwrap().as_str()),
            (0o640, "new")
        );
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_link_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomically(&link, "new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink(dir.path().join("missing"), &dangling).unwrap();
        let e = write_atomically(&dangling, "x").unwrap_err().to_string();
        assert!(e.contains("symbolic link to a missing file"), "{e}");
    }

    #[test]
    fn refuses_what_is_not_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = write_atomically(dir.path(), "x").unwrap_err().to_string();
        assert!(e.contains("it is a directory"), "{e}");
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = write_atomically(&fifo, "x").unwrap_err().to_string();
        assert!(e.contains("FIFO"), "{e}");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        let sock = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        assert!(write_atomically(&sock, "x")
            .unwrap_err()
            .to_string()
            .contains("a socket"));
        // A character device, through a link so that nothing under /dev is at risk.
        let null = dir.path().join("null");
        std::os::unix::fs::symlink("/dev/null", &null).unwrap();
        assert!(write_atomically(&null, "x")
            .unwrap_err()
            .to_string()
            .contains("character device"));
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let missing = dir.path().join("no/such/folder/out.json");
        assert!(write_atomically(&missing, "x")
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
    }
}
