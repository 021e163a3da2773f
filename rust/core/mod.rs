//! The pyo3-free core: gathering columns, padding and stacking. `cargo test` runs it without
//! Python; the binding layer in `rust/py` only converts Python objects to and from it.

#[cfg(target_os = "linux")]
pub mod arena_attachments;
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
#[cfg(target_os = "linux")]
pub mod shared_arena;
pub mod sizes;
pub mod stream_grouping;
pub mod stream_packing;
pub mod version;
