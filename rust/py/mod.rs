//! The binding layer (`fastcollate._native`): walks Python rows once (attached), hands plain
//! columns to the core with the interpreter released, and gives the core's buffers to numpy or
//! torch without copying them. In folders by role: `convert/` reads Python rows in (pad groups
//! of the usual kind straight into the core's padded buffers, the strict route of
//! `convert::reader`), `output/`
//! hands buffers out, and `bindings/` holds the exported functions, one file per domain, using
//! both; neither `convert/` nor `output/` uses `bindings/`, and no files use each other around
//! a cycle (tests/project/test_rust_layout.py). `error.rs` maps the core's errors to exceptions.
//!
//! This file only registers the module.

mod bindings;
mod convert;
mod error;
mod output;

use pyo3::prelude::*;

#[pymodule(gil_used = false)]
mod _native {
    #[pymodule_export]
    use super::bindings::arrow::{collate_arrow, collate_arrow_planned, PyArrowColumn};
    #[pymodule_export]
    use super::bindings::collate::{collate, collate_planned, PyCollatePlan};
    #[pymodule_export]
    use super::bindings::flatten::flatten_batch;
    #[pymodule_export]
    use super::bindings::floor::PyPadFloor;
    #[pymodule_export]
    use super::bindings::frames::pad_frames;
    #[pymodule_export]
    use super::bindings::grouping::group_by_length;
    #[pymodule_export]
    use super::bindings::masking::{compare_exchange, mask_tokens};
    #[pymodule_export]
    use super::bindings::pack_dataset::{
        pack_dataset_bfd, pack_dataset_fullest, pack_dataset_gather, pack_dataset_gather_chunks,
        pack_dataset_wrapped,
    };
    #[pymodule_export]
    use super::bindings::pad_with_labels::pad_with_labels;
    #[pymodule_export]
    use super::bindings::planned_call::{usual_main_input_kind, PyPlannedCall};
    #[pymodule_export]
    use super::bindings::preference::pad_prompt_completion;
    #[pymodule_export]
    use super::bindings::sampling::{pack_epoch, rebalance_epoch};
    #[pymodule_export]
    use super::bindings::sizes::check_output_size;
    #[pymodule_export]
    use super::bindings::streams::{group_stream_buffer, pack_stream_buffer};
    #[pymodule_export]
    use super::bindings::tokenizer_state::{has_state_key, pad_id_inputs};
    #[pymodule_export]
    use super::bindings::trl_pad::pad_sequences;
    #[cfg(target_os = "linux")]
    #[pymodule_export]
    use super::bindings::worker_arena::{
        mapped_arenas, receive_arena_view, sweep_arenas, PyWorkerArena,
    };
    #[pymodule_export]
    use super::convert::pad_plan::PyPadGroup;

    #[pymodule_init]
    fn init(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        use pyo3::types::PyModuleMethods;
        // Cargo's version in the form the wheel carries (PEP 440): maturin writes the
        // pre-release "0.2.0-dev0" as "0.2.0.dev0", "1.0.0-rc1" as "1.0.0rc1".
        m.add(
            "__version__",
            crate::core::version::pep440(env!("CARGO_PKG_VERSION")),
        )?;
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
