//! Binding for `PackedStream`'s core (`core::stream_packing`): packs one buffer's lengths with
//! the interpreter released and hands back (indices, offsets, carried) arrays.

use std::borrow::Cow;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::core::stream_packing::BufferPacking;

type I64Array<'py> = Bound<'py, PyArray1<i64>>;

/// One stream buffer packed best-fit decreasing: the batches to emit (buffer positions, as
/// indices and offsets) and the positions carried into the next buffer.
#[pyfunction]
#[pyo3(signature = (lengths, max_tokens, *, truncate, last, seed, epoch, buffer_number))]
#[allow(clippy::too_many_arguments)]
pub fn pack_stream_buffer<'py>(
    py: Python<'py>,
    lengths: PyReadonlyArray1<'py, i64>,
    max_tokens: i64,
    truncate: bool,
    last: bool,
    seed: u64,
    epoch: u64,
    buffer_number: u64,
) -> PyResult<(I64Array<'py>, I64Array<'py>, I64Array<'py>)> {
    let plan = BufferPacking {
        max_tokens,
        truncate,
        last,
        seed,
        epoch,
        buffer_number,
    };
    let lengths: Cow<'_, [i64]> = match lengths.as_slice() {
        Ok(slice) => Cow::Borrowed(slice),
        Err(_) => Cow::Owned(lengths.as_array().to_vec()),
    };
    let packed = py.detach(|| plan.pack(&lengths))?;
    Ok((
        PyArray1::from_vec(py, packed.batches.indices),
        PyArray1::from_vec(py, packed.batches.offsets),
        PyArray1::from_vec(py, packed.carried),
    ))
}
