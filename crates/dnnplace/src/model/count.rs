//! Device and machine counts as users write them, and the clamp to what a plan can use.
//!
//! Every reader of a cluster's counts (the cluster file, a workload's `cluster` section,
//! the `--cluster` short form) reads them as a [`Count`]: any whole number ≥ 0, held in a
//! `u64` and saturating beyond it (`18446744073709551616` and `1e30` read as `u64::MAX`),
//! so reading never overflows and never allocates by the number. A fraction, a negative
//! number or a non-number is an error naming the field.
//!
//! A count is then clamped to what a plan can use ([`Count::clamped`]): a plan puts each of
//! its n nodes on one device, so it uses at most n machines of one entry, n accelerators
//! of one entry of a machine and n CPU cores of one machine. Machines of one entry are
//! identical (and so are the devices of one entry), so keeping `min(count, n)` of them
//! loses no plan. Without a workload at hand the clamp is [`MAX_COUNT`]. Each clamp gives
//! a note, as `--accelerators` beyond the nodes does. Whatever is left is bounded in
//! total by [`MAX_DEVICES`] (checked by [`super::Cluster::new`]), so a cluster's device
//! lists stay below a few tens of megabytes.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// The largest count kept when the workload (and so n) is not known.
pub const MAX_COUNT: usize = 1 << 16;

/// The most devices (accelerators and CPU cores) a cluster may hold after clamping.
pub const MAX_DEVICES: usize = 1 << 22;

/// A count as written: a whole number ≥ 0, saturating at `u64::MAX` (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Count(pub u64);

impl Count {
    /// A count from decimal digits (the short form); more than `u64::MAX` saturates.
    pub fn parse(text: &str) -> Option<Count> {
        let t = text.trim();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Count(t.parse::<u64>().unwrap_or(u64::MAX)))
    }

    /// The count as written (saturating at `usize::MAX`).
    pub fn get(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }

    /// `min(self, limit)`, with a note naming `field` when the count is cut.
    pub fn clamped(self, limit: usize, field: &str, notes: &mut Vec<String>) -> usize {
        let n = self.get();
        if n > limit {
            notes.push(format!(
                "{field} = {} is more than a plan can use; clamped to {limit}",
                self.0
            ));
            limit
        } else {
            n
        }
    }
}

impl From<usize> for Count {
    fn from(n: usize) -> Count {
        Count(n as u64)
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a whole number >= 0")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Count, E> {
                Ok(Count(v))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<Count, E> {
                Ok(Count(u64::try_from(v).unwrap_or(u64::MAX)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Count, E> {
                u64::try_from(v)
                    .map(Count)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<Count, E> {
                if v < 0 {
                    return Err(E::custom(format!(
                        "{v} is negative; expected {}",
                        "a whole number >= 0"
                    )));
                }
                Ok(Count(u64::try_from(v).unwrap_or(u64::MAX)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Count, E> {
                if v >= 0.0 && v.fract() == 0.0 {
                    // `as` saturates: 1e30 is u64::MAX, clamped later with a note.
                    Ok(Count(v as u64))
                } else {
                    Err(E::invalid_value(de::Unexpected::Float(v), &self))
                }
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_saturate_and_reject_what_is_no_count() {
        assert_eq!(Count::parse("18446744073709551615"), Some(Count(u64::MAX)));
        assert_eq!(
            Count::parse("99999999999999999999999"),
            Some(Count(u64::MAX))
        );
        assert_eq!(Count::parse("12"), Some(Count(12)));
        for bad in ["", "-1", "1.5", "1e3", "x"] {
            assert_eq!(Count::parse(bad), None, "{bad}");
        }
        let json = |t: &str| serde_json::from_str::<Count>(t).map_err(|e| e.to_string());
        assert_eq!(json("1000000000000"), Ok(Count(1_000_000_000_000)));
        assert_eq!(json("1e12"), Ok(Count(1_000_000_000_000)));
        assert_eq!(json("1e300"), Ok(Count(u64::MAX)));
        assert!(json("-1").unwrap_err().contains("whole number"));
        assert!(json("2.5").unwrap_err().contains("whole number"));
        assert!(json("\"3\"").unwrap_err().contains("whole number"));
    }

    #[test]
    fn clamping_says_what_it_cut() {
        let mut notes = Vec::new();
        assert_eq!(Count(5).clamped(7, "count", &mut notes), 5);
        assert!(notes.is_empty());
        assert_eq!(
            Count(u64::MAX).clamped(7, "machines[0].count", &mut notes),
            7
        );
        assert_eq!(
            notes,
            ["machines[0].count = 18446744073709551615 is more than a plan can use; clamped to 7"]
        );
    }
}
