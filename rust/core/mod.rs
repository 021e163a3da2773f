//! The pyo3-free core: gathering columns, padding and stacking. `cargo test` runs it without
//! Python; the binding layer in `rust/py` only converts Python objects to and from it.

pub mod arrow;
pub mod batches;
pub mod column;
pub mod error;
pub mod flatten;
pub mod frames;
pub mod fresh_pages;
pub mod grouping;
pub mod masking;
pub mod pack_dataset;
pub mod packing;
pub mod pad;
pub mod preference;
pub mod rebalance;
pub mod rng;
pub mod sizes;
pub mod stream_grouping;
pub mod stream_packing;
pub mod version;
