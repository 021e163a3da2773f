//! Binding for the length-grouping core: copies the numpy lengths and permutation in
//! (`OwnedArray1`), groups with the interpreter released, and hands the result to numpy
//! without copying it.

use pyo3::prelude::*;

use crate::core::grouping;
use crate::py::convert::array_values::OwnedArray1;
use crate::py::output::numpy_arrays::{vector, I64Array};

/// `lengths` and `permutation` are int64 arrays of the same size; returns the grouped indices
/// as an int64 array (transformers' `get_length_grouped_indices` after its `torch.randperm`).
#[pyfunction]
#[pyo3(signature = (lengths, permutation, batch_size, mega_batch_mult=None))]
pub fn group_by_length<'py>(
    py: Python<'py>,
    lengths: OwnedArray1<i64>,
    permutation: OwnedArray1<i64>,
    batch_size: i64,
    mega_batch_mult: Option<i64>,
) -> PyResult<I64Array<'py>> {
    let (lengths, permutation) = (lengths.0, permutation.0);
    let indices = py.detach(|| {
        grouping::group_by_length(&lengths, &permutation, batch_size, mega_batch_mult)
    })?;
    vector(py, indices)
}
