//! The exported functions, one file per domain: each takes Python arguments, converts them
//! (`convert`), calls the core with the interpreter released, and hands the outputs back
//! (`output`).

pub mod arrow;
pub mod collate;
pub mod flatten;
pub mod floor;
pub mod frames;
pub mod grouping;
pub mod masking;
pub mod pack_dataset;
pub mod pad_with_labels;
pub mod planned_call;
pub mod preference;
pub mod sampling;
pub mod sizes;
pub mod streams;
pub mod tokenizer_state;
pub mod trl_pad;
#[cfg(target_os = "linux")]
pub mod worker_arena;
