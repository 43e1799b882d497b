//! Device profiles, as the cost model names them: the data type and the built-in catalogue
//! live in [`crate::model::profiles`] (the cluster reader in `io` needs them), reading a
//! profile file in [`crate::io::profile_file`]. Re-exported here so
//! `dnnplace::costmodel::profiles::…` keeps working.

pub use crate::model::profiles::*;
