//! Binding for `LengthGroupedStream`'s core (`core::stream_grouping`): groups one buffer's
//! lengths with the interpreter released and hands back (indices, offsets, carried) arrays.

use std::borrow::Cow;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::core::stream_grouping::BufferGrouping;

type I64Array<'py> = Bound<'py, PyArray1<i64>>;

/// One stream buffer sorted by length and cut into batches of `batch_size`: the batches to
/// emit (buffer positions, as indices and offsets) and the positions carried into the next
/// buffer.
#[pyfunction]
#[pyo3(signature = (lengths, batch_size, *, last, seed, epoch, buffer_number))]
pub fn group_stream_buffer<'py>(
    py: Python<'py>,
    lengths: PyReadonlyArray1<'py, i64>,
    batch_size: i64,
    last: bool,
    seed: u64,
    epoch: u64,
    buffer_number: u64,
) -> PyResult<(I64Array<'py>, I64Array<'py>, I64Array<'py>)> {
    let plan = BufferGrouping {
        batch_size,
        last,
        seed,
        epoch,
        buffer_number,
    };
    let lengths: Cow<'_, [i64]> = match lengths.as_slice() {
        Ok(slice) => Cow::Borrowed(slice),
        Err(_) => Cow::Owned(lengths.as_array().to_vec()),
    };
    let grouped = py.detach(|| plan.group(&lengths))?;
    Ok((
        PyArray1::from_vec(py, grouped.batches.indices),
        PyArray1::from_vec(py, grouped.batches.offsets),
        PyArray1::from_vec(py, grouped.carried),
    ))
}
