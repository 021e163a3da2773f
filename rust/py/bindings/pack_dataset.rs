//! Binding for `pack_dataset`'s core (`core::pack_dataset`): copies the numpy row lengths and
//! batch boundaries in (`OwnedArray1`), plans with the interpreter released, and hands back numpy arrays.

use numpy::PyArray1;
use pyo3::prelude::*;

use crate::core::pack_dataset::{self, Overflow, PackedRows};
use crate::py::convert::array_values::OwnedArray1;
use crate::py::output::numpy_arrays::{vector, I64Array};

type PackedArrays<'py> = (I64Array<'py>, I64Array<'py>, I64Array<'py>, I64Array<'py>);

/// `split=True`: a row longer than `seq_length` is cut into pieces, else truncated.
fn overflow(split: bool) -> Overflow {
    if split {
        Overflow::Split
    } else {
        Overflow::Truncate
    }
}

/// A plan's four arrays, handed to numpy without a copy: piece starts, piece lengths, pieces
/// per packed row (offsets), values per packed row (offsets).
fn packed_arrays(py: Python<'_>, plan: PackedRows) -> PyResult<PackedArrays<'_>> {
    Ok((
        vector(py, plan.starts)?,
        vector(py, plan.lengths)?,
        vector(py, plan.piece_offsets)?,
        vector(py, plan.value_offsets)?,
    ))
}

/// TRL's best-fit decreasing over each batch `bounds[b]..bounds[b + 1]` of rows: (piece starts
/// in the flattened values, piece lengths, pieces per packed row as offsets, values per packed
/// row as offsets).
#[pyfunction]
#[pyo3(signature = (lengths, bounds, seq_length, *, split))]
pub fn pack_dataset_bfd<'py>(
    py: Python<'py>,
    lengths: OwnedArray1<i64>,
    bounds: OwnedArray1<i64>,
    seq_length: i64,
    split: bool,
) -> PyResult<PackedArrays<'py>> {
    let overflow = overflow(split);
    let (lengths, bounds) = (lengths.0, bounds.0);
    let plan =
        py.detach(|| pack_dataset::best_fit_decreasing(&lengths, &bounds, seq_length, overflow))?;
    packed_arrays(py, plan)
}

/// `whole_dataset=True`: all rows packed fullest-first (`pack_dataset::fullest_first`); the
/// same four arrays as `pack_dataset_bfd`.
#[pyfunction]
#[pyo3(signature = (lengths, seq_length, *, split))]
pub fn pack_dataset_fullest<'py>(
    py: Python<'py>,
    lengths: OwnedArray1<i64>,
    seq_length: i64,
    split: bool,
) -> PyResult<PackedArrays<'py>> {
    let overflow = overflow(split);
    let lengths = lengths.0;
    let plan = py.detach(|| pack_dataset::fullest_first(&lengths, seq_length, overflow))?;
    packed_arrays(py, plan)
}

/// TRL's `"wrapped"`: the packed rows' offsets into the flattened values.
#[pyfunction]
pub fn pack_dataset_wrapped<'py>(
    py: Python<'py>,
    lengths: OwnedArray1<i64>,
    bounds: OwnedArray1<i64>,
    seq_length: i64,
) -> PyResult<I64Array<'py>> {
    let (lengths, bounds) = (lengths.0, bounds.0);
    let offsets = py.detach(|| pack_dataset::wrapped(&lengths, &bounds, seq_length))?;
    vector(py, offsets)
}

/// The pieces' fixed-width values (`width` bytes each), copied out of `values` in order; or,
/// with `values=None`, their flattened-value indices for an Arrow `take`.
#[pyfunction]
#[pyo3(signature = (starts, lengths, values=None, width=1))]
pub fn pack_dataset_gather<'py>(
    py: Python<'py>,
    starts: OwnedArray1<i64>,
    lengths: OwnedArray1<i64>,
    values: Option<OwnedArray1<u8>>,
    width: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let (starts, lengths) = (starts.0, lengths.0);
    match values {
        None => {
            let indices = py.detach(|| pack_dataset::take_indices(&starts, &lengths));
            Ok(vector(py, indices)?.into_any())
        }
        Some(values) => {
            let values = values.0;
            let out = py.detach(|| pack_dataset::gather(&values, width, &starts, &lengths))?;
            Ok(vector(py, out)?.into_any())
        }
    }
}

/// The pieces' fixed-width values (`width` bytes each) copied, in order, out of values held in
/// consecutive chunks (a multi-chunk Arrow column's buffers, never concatenated first).
#[pyfunction]
pub fn pack_dataset_gather_chunks<'py>(
    py: Python<'py>,
    starts: OwnedArray1<i64>,
    lengths: OwnedArray1<i64>,
    chunks: Vec<OwnedArray1<u8>>,
    width: usize,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let (starts, lengths) = (starts.0, lengths.0);
    let slices: Vec<&[u8]> = chunks.iter().map(|chunk| chunk.0.as_slice()).collect();
    let out = py.detach(|| pack_dataset::gather_chunks(&slices, width, &starts, &lengths))?;
    vector(py, out)
}
