//! The binding layer: walks Python rows once (attached), hands plain columns to the core with
//! the interpreter released, and gives the core's buffers to numpy without copying them. Pad
//! groups of the usual kind skip the columns: `in_place` writes their rows straight into the
//! core's padded buffers.
//!
//! This file only registers the module; each binding lives in the file of its domain.

mod arrow;
mod collate;
mod dlpack;
mod error;
mod flatten;
mod frames;
mod gather;
mod grouping;
mod in_place;
mod ints;
mod joined;
mod masking;
mod output_buffers;
mod pack_dataset;
mod pad;
mod padded_with_labels;
mod read;
mod rows;
mod sampling;
mod sequences;
mod stream_grouping;
mod stream_packing;
mod tensors;

use pyo3::prelude::*;

#[pymodule(gil_used = false)]
mod _native {
    #[pymodule_export]
    use super::arrow::{collate_arrow, ArrowColumnHandle};
    #[pymodule_export]
    use super::collate::{collate, collate_planned, CollatePlan};
    #[pymodule_export]
    use super::flatten::flatten_batch;
    #[pymodule_export]
    use super::frames::pad_frames;
    #[pymodule_export]
    use super::grouping::group_by_length;
    #[pymodule_export]
    use super::joined::pad_prompt_completion;
    #[pymodule_export]
    use super::masking::{compare_exchange, mask_tokens};
    #[pymodule_export]
    use super::pack_dataset::{
        pack_dataset_bfd, pack_dataset_fullest, pack_dataset_gather, pack_dataset_gather_chunks,
        pack_dataset_wrapped,
    };
    #[pymodule_export]
    use super::padded_with_labels::pad_with_labels;
    #[pymodule_export]
    use super::sampling::{pack_epoch, rebalance_epoch};
    #[pymodule_export]
    use super::sequences::pad_sequences;
    #[pymodule_export]
    use super::stream_grouping::group_stream_buffer;
    #[pymodule_export]
    use super::stream_packing::pack_stream_buffer;

    #[pymodule_init]
    fn init(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        use pyo3::types::PyModuleMethods;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add(
            "build_profile",
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
        )?;
        Ok(())
    }
}
