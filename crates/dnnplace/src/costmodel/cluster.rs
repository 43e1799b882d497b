//! Clusters from what users write (the `--cluster` short form and cluster files), as the
//! cost model names them: resolution lives in [`crate::io::cluster_resolve`] (the workload
//! reader needs it for a workload's `cluster` section). Re-exported here so
//! `dnnplace::costmodel::cluster::…` keeps working.

pub use crate::io::cluster_resolve::*;
