//! The rules every JSON file the tool reads follows, in one place.
//!
//! A file is exactly one JSON object, optionally preceded by a UTF-8 byte-order mark
//! (U+FEFF, which some Windows editors write) and surrounded by whitespace. Anything else
//! after the value (`{…}{ garbage`, a second document) is an error naming the line and
//! column where it starts, never silently ignored. A mistyped or missing field is reported
//! with its JSON path (`nodes[3].fpgaLatency`) and position. No file format here is
//! recursive; values nested deeper than serde_json's limit (128) are an error, and unknown
//! fields (ignored) are skipped without recursion, so no nesting overflows the stack.
//!
//! Cost: one pass over the text, O(|text|); a second one, tracking the path, on an error.

use serde::de::DeserializeOwned;

use super::IoError;

/// U+FEFF, the byte-order mark, as the first character of a UTF-8 text.
const BOM: char = '\u{feff}';

/// Parses `text` as one object of type `T` under the rules of the module documentation.
pub fn parse_json<T: DeserializeOwned>(text: &str) -> Result<T, IoError> {
    let text = text.strip_prefix(BOM).unwrap_or(text);
    // serde would read an array positionally into a struct's fields; every file is an object.
    if let Some(at) = text
        .find(|c: char| !c.is_ascii_whitespace())
        .filter(|&i| text[i..].starts_with('['))
    {
        let line = 1 + text[..at].matches('\n').count();
        return Err(IoError::Format(format!(
            "expected a JSON object {{…}}, found an array at line {line}"
        )));
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    // Tracking the path costs about as much as the parse itself, so a file is read without
    // it first, and read again with it only to word an error: same deserializer, same
    // input, so the second pass fails at the same place.
    let value: T = match T::deserialize(&mut *de) {
        Ok(value) => value,
        Err(plain) => {
            return Err(with_path::<T>(text).unwrap_or(IoError::Format(plain.to_string())))
        }
    };
    de.end()
        .map_err(|e| IoError::Format(format!("text after the end of the JSON document: {e}")))?;
    Ok(value)
}

/// The error of reading `text` as a `T`, worded with the JSON path where it occurred
/// (`None` if this pass succeeds).
fn with_path<T: DeserializeOwned>(text: &str) -> Option<IoError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let e = serde_path_to_error::deserialize::<_, T>(&mut *de).err()?;
    let path = e.path().to_string();
    let inner = e.into_inner();
    Some(if path == "." {
        IoError::Format(inner.to_string())
    } else {
        IoError::Format(format!("at {path}: {inner}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Pair {
        a: i64,
        b: Vec<f64>,
    }

    #[test]
    fn one_value_with_optional_bom() {
        let ok = Pair { a: 1, b: vec![2.0] };
        assert_eq!(parse_json::<Pair>(r#"{"a":1,"b":[2]}"#).unwrap(), ok);
        assert_eq!(
            parse_json::<Pair>("\u{feff}{\"a\":1,\"b\":[2]}\n\n").unwrap(),
            ok
        );
        // A BOM anywhere else is not whitespace.
        assert!(parse_json::<Pair>(" \u{feff}{\"a\":1,\"b\":[2]}").is_err());
    }

    #[test]
    fn trailing_text_names_its_position() {
        let err = parse_json::<Pair>("{\"a\":1,\"b\":[2]}\n}{ garbage")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("after the end of the JSON document") && err.contains("line 2 column 1"),
            "{err}"
        );
        let err = parse_json::<Pair>("{\"a\":1,\"b\":[2]} {\"a\":1,\"b\":[]}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1 column 17"), "{err}");
    }

    #[test]
    fn field_errors_carry_their_path() {
        let err = parse_json::<Pair>(r#"{"a":1,"b":[2,"x"]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("at b[1]:"), "{err}");
        let err = parse_json::<Pair>("").unwrap_err().to_string();
        assert!(err.starts_with("EOF while parsing"), "{err}");
        let deep = "[".repeat(100_000);
        let deep = format!("{{\"a\": {deep}");
        assert!(parse_json::<serde_json::Value>(&deep)
            .unwrap_err()
            .to_string()
            .contains("recursion limit"));
        // An unknown field is skipped without recursion, however deep.
        let ignored = format!(
            "{{\"a\": 1, \"b\": [], \"x\": {}{}}}",
            "[".repeat(1_000_000),
            "]".repeat(1_000_000)
        );
        assert_eq!(
            parse_json::<Pair>(&ignored).unwrap(),
            Pair { a: 1, b: vec![] }
        );
        let err = parse_json::<Pair>("\n [1, [2]]").unwrap_err().to_string();
        assert!(err.contains("found an array at line 2"), "{err}");
    }
}
