//! Bindings for the streaming samplers' cores, one bounded buffer at a time:
//! `LengthGroupedStream` (`core::stream_grouping`) and `PackedStream` (`core::stream_packing`).
//! Each copies the buffer's lengths in (`OwnedArray1`), plans with the interpreter released, and hands back
//! (indices, offsets, carried) arrays.

use pyo3::prelude::*;

use crate::core::batches::Batches;
use crate::core::packing::PackingError;
use crate::core::stream_grouping::BufferGrouping;
use crate::core::stream_packing::BufferPacking;
use crate::py::convert::array_values::OwnedArray1;
use crate::py::output::numpy_arrays::{batch_arrays, vector, I64Array};

/// A buffer's batches to emit (buffer positions, as indices and offsets) and the positions
/// carried into the next buffer.
type BufferArrays<'py> = (I64Array<'py>, I64Array<'py>, I64Array<'py>);

/// Cuts one buffer into batches from its lengths (borrowed, or copied once when strided) with
/// the interpreter released, and hands back its arrays.
fn batch_buffer<'py>(
    py: Python<'py>,
    lengths: OwnedArray1<i64>,
    batch: impl FnOnce(&[i64]) -> Result<(Batches, Vec<i64>), PackingError> + Send,
) -> PyResult<BufferArrays<'py>> {
    let lengths = lengths.0;
    let (batches, carried) = py.detach(|| batch(&lengths))?;
    let (indices, offsets) = batch_arrays(py, batches)?;
    Ok((indices, offsets, vector(py, carried)?))
}

/// One stream buffer sorted by length and cut into batches of `batch_size`: the batches to
/// emit (buffer positions, as indices and offsets) and the positions carried into the next
/// buffer.
#[pyfunction]
#[pyo3(signature = (lengths, batch_size, *, last, seed, epoch, buffer_number))]
pub fn group_stream_buffer<'py>(
    py: Python<'py>,
    lengths: OwnedArray1<i64>,
    batch_size: i64,
    last: bool,
    seed: u64,
    epoch: u64,
    buffer_number: u64,
) -> PyResult<BufferArrays<'py>> {
    let plan = BufferGrouping {
        batch_size,
        last,
        seed,
        epoch,
        buffer_number,
    };
    batch_buffer(py, lengths, |lengths| {
        plan.group(lengths)
            .map(|grouped| (grouped.batches, grouped.carried))
    })
}

/// One stream buffer packed best-fit decreasing: the batches to emit (buffer positions, as
/// indices and offsets) and the positions carried into the next buffer.
#[pyfunction]
#[pyo3(signature = (lengths, max_tokens, *, truncate, last, seed, epoch, buffer_number))]
#[allow(clippy::too_many_arguments)]
pub fn pack_stream_buffer<'py>(
    py: Python<'py>,
    lengths: OwnedArray1<i64>,
    max_tokens: i64,
    truncate: bool,
    last: bool,
    seed: u64,
    epoch: u64,
    buffer_number: u64,
) -> PyResult<BufferArrays<'py>> {
    let plan = BufferPacking {
        max_tokens,
        truncate,
        last,
        seed,
        epoch,
        buffer_number,
    };
    batch_buffer(py, lengths, |lengths| {
        plan.pack(lengths)
            .map(|packed| (packed.batches, packed.carried))
    })
}
