//! `--highs-option NAME=VALUE`, checked against HiGHS's own option table before any model
//! is built: the option must exist, the value must have the option's type (bool, integer,
//! double or string) and lie in its range (`Highs_getIntOptionValues` /
//! `Highs_getDoubleOptionValues`), and a string must be one HiGHS accepts (it is set on a
//! scratch instance, which runs HiGHS's own check, e.g. `presolve` ∈ {off, choose, on}).
//! `threads` is clamped to the machine's cores when the option is applied (HiGHS allocates
//! per thread: `threads=100000` ran out of memory).

use std::ffi::CString;

use highs::{Model, RowProblem};

/// The largest `mip_feasibility_tolerance` taken, exclusive. HiGHS's table allows any
/// value ≥ 1e-10, but it is also HiGHS's integrality tolerance, so from 0.5 on a binary at
/// 0.5 is both 0 and 1 and the model means nothing; and HiGHS 1.15 without a warm start
/// (the second opinion's runs, [`super::second_opinion`]) failed with "Error" at 10 and
/// 1e5, and crashed (SIGSEGV) at 1e308 with `presolve=off` (fuzz, seed 26).
pub const MAX_INTEGRALITY_TOLERANCE: f64 = 0.5;

/// HiGHS's option types (`kHighsOptionType*` of its C API).
const BOOL: i32 = 0;
const INT: i32 = 1;
const DOUBLE: i32 = 2;
const STRING: i32 = 3;

/// Checks `name=value` against HiGHS's option table (module documentation); the error
/// names the option and what it takes.
pub fn check_highs_option(name: &str, value: &str) -> Result<(), String> {
    let scratch = Model::try_new(RowProblem::default())
        .map_err(|e| format!("HiGHS could not start to check option {name}: {e:?}"))?;
    let c_name = CString::new(name).map_err(|_| format!("option {name}: a NUL in the name"))?;
    let mut kind: highs_sys::HighsInt = -1;
    // SAFETY: a live HiGHS instance, a NUL-terminated name and a valid out-pointer.
    let found =
        unsafe { highs_sys::Highs_getOptionType(scratch.as_ptr(), c_name.as_ptr(), &mut kind) };
    if found != highs_sys::STATUS_OK {
        return Err(format!(
            "unknown HiGHS option '{name}' (see HiGHS's option list)"
        ));
    }
    let mut scratch = scratch;
    match kind as i32 {
        BOOL => match value {
            "true" | "false" => Ok(()),
            _ => Err(format!("option {name} takes true or false, not '{value}'")),
        },
        INT => {
            let v: i32 = value
                .parse()
                .map_err(|_| format!("option {name} takes an integer, not '{value}'"))?;
            let (mut cur, mut lo, mut hi, mut def) = (0, 0, 0, 0);
            // SAFETY: as above, four valid out-pointers.
            unsafe {
                highs_sys::Highs_getIntOptionValues(
                    scratch.as_ptr(),
                    c_name.as_ptr(),
                    &mut cur,
                    &mut lo,
                    &mut hi,
                    &mut def,
                )
            };
            if (lo as i64..=hi as i64).contains(&(v as i64)) {
                Ok(())
            } else {
                Err(format!("option {name} is {v}; it must be in {lo}..={hi}"))
            }
        }
        DOUBLE => {
            let v: f64 = value
                .parse()
                .ok()
                .filter(|v: &f64| !v.is_nan())
                .ok_or_else(|| format!("option {name} takes a number, not '{value}'"))?;
            let (mut cur, mut lo, mut hi, mut def) = (0.0, 0.0, 0.0, 0.0);
            // SAFETY: as above.
            unsafe {
                highs_sys::Highs_getDoubleOptionValues(
                    scratch.as_ptr(),
                    c_name.as_ptr(),
                    &mut cur,
                    &mut lo,
                    &mut hi,
                    &mut def,
                )
            };
            if name == "mip_feasibility_tolerance" && v >= MAX_INTEGRALITY_TOLERANCE {
                Err(format!(
                    "option {name} is {value}; it must be below {MAX_INTEGRALITY_TOLERANCE} (it is HiGHS's integrality tolerance: at 0.5 a binary at 0.5 counts as both 0 and 1)"
                ))
            } else if v >= lo && v <= hi {
                Ok(())
            } else {
                Err(format!(
                    "option {name} is {v}; it must be in [{lo:e}, {hi:e}]"
                ))
            }
        }
        STRING => scratch
            .try_set_option(name, value)
            .map_err(|_| format!("HiGHS does not accept {name}={value}")),
        other => Err(format!(
            "option {name} has a type ({other}) dnnplace cannot set"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_against_highs_own_table() {
        for ok in [
            ("presolve", "off"),
            ("time_limit", "5"),
            ("threads", "100000"),
            ("mip_rel_gap", "1e-3"),
            ("mip_feasibility_tolerance", "0.49"),
            ("output_flag", "false"),
        ] {
            assert_eq!(check_highs_option(ok.0, ok.1), Ok(()), "{ok:?}");
        }
        for (name, value, says) in [
            ("presolve", "maybe", "presolve=maybe"),
            (
                "no_such_option",
                "1",
                "unknown HiGHS option 'no_such_option'",
            ),
            ("time_limit", "-5", "time_limit is -5"),
            (
                "mip_feasibility_tolerance",
                "1e308",
                "mip_feasibility_tolerance is 1e308; it must be below 0.5",
            ),
            ("mip_feasibility_tolerance", "0.5", "it must be below 0.5"),
            ("time_limit", "soon", "takes a number"),
            ("mip_max_nodes", "1.5", "takes an integer"),
            ("output_flag", "maybe", "true or false"),
        ] {
            let e = check_highs_option(name, value).unwrap_err();
            assert!(e.contains(says), "{name}={value}: {e}");
        }
    }
}
