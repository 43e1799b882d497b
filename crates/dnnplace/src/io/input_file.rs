//! Input files: read whole, within a size limit, with messages a person can act on.
//!
//! [`read_input`]`(path, limit)` refuses a directory and a character or block device (reading
//! `/dev/zero` or `/dev/urandom` never ends; a terminal is not a file), refuses a regular
//! file larger than `limit` before reading it, and reads anything else (a pipe, a FIFO,
//! `/dev/stdin`) up to `limit + 1` bytes, so no input makes the reader allocate more than
//! `limit` bytes. [`text_of`] checks that the bytes are UTF-8 and says where they are not.
//!
//! Limits: [`TEXT_LIMIT_BYTES`] (1 GiB) for workload, placement and profile text — a
//! million-node workload is about 200 MB, the published ones under 1 MB; the ONNX reader
//! uses 2 GiB, protobuf's limit on one message.
//!
//! Cost: O(file size) time and memory.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// The largest workload, placement or profile file read: 1 GiB.
pub const TEXT_LIMIT_BYTES: u64 = 1 << 30;

fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// The bytes of `path`, at most `limit` of them; `Err` is a message without the path.
pub fn read_input(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    let t = meta.file_type();
    let kind = if t.is_dir() {
        Some("a directory")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else {
        None
    };
    if let Some(kind) = kind {
        return Err(format!("it is {kind}, not a file"));
    }
    let too_big = || {
        format!(
            "the file is larger than {}, the most this reader accepts",
            human(limit)
        )
    };
    if t.is_file() && meta.len() > limit {
        return Err(too_big());
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(bytes)
}

/// Bytes of a text file → `&str`, with a message a person can act on when they are not
/// UTF-8 (a UTF-16 byte-order mark is named as such).
pub fn text_of(bytes: &[u8]) -> Result<&str, String> {
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err(
            "the file is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as UTF-8"
                .into(),
        );
    }
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count();
        format!(
            "the file is not UTF-8 text: invalid byte 0x{:02X} at byte offset {at} (line {line})",
            bytes[at]
        )
    })
}

/// [`read_input`] then [`text_of`].
pub fn read_input_text(path: &Path, limit: u64) -> Result<String, String> {
    let bytes = read_input(path, limit)?;
    text_of(&bytes)?;
    Ok(String::from_utf8(bytes).expect("checked by text_of"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_oversized_files_are_refused_before_reading() {
        assert!(read_input(Path::new("/dev/zero"), 10)
            .unwrap_err()
            .contains("character device"));
        let dir = tempfile::tempdir().unwrap();
        assert!(read_input(dir.path(), 10)
            .unwrap_err()
            .contains("a directory"));
        let big = dir.path().join("big.json");
        std::fs::write(&big, "x".repeat(11)).unwrap();
        assert!(read_input(&big, 10).unwrap_err().contains("larger than"));
        assert_eq!(read_input(&big, 11).unwrap().len(), 11);
        assert!(read_input(&dir.path().join("missing"), 10)
            .unwrap_err()
            .contains("No such file"));
    }

    #[test]
    fn a_pipe_is_read_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let writer_path = fifo.clone();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(writer_path)
                .unwrap();
            // The reader stops after limit + 1 bytes; a closed pipe then ends the writer.
            let _ = f.write_all(&[b'a'; 100]);
        });
        assert!(read_input(&fifo, 10).unwrap_err().contains("larger than"));
        writer.join().unwrap();
    }

    #[test]
    fn non_utf8_is_named() {
        assert!(text_of(b"\xff\xfe{\x00").unwrap_err().contains("UTF-16"));
        let err = text_of(b"{\n\"a\": \xc3\x28}").unwrap_err();
        assert!(err.contains("0xC3 at byte offset 7 (line 2)"), "{err}");
        assert_eq!(text_of(b"ok").unwrap(), "ok");
    }
}
