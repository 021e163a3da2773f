//! Binding for masked-LM masking: borrows the padded `input_ids` array for writing, masks it in
//! place with the interpreter released, and hands the labels buffer to numpy without a copy.

use std::sync::atomic::{AtomicI64, Ordering};

use numpy::{
    PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::core::masking::{self, MaskOptions, Special};
use crate::core::rng::Xoshiro256PlusPlus;
use crate::py::output::numpy_arrays::matrix;

fn contiguous<'a, T>(slice: Result<&'a [T], numpy::AsSliceError>, key: &str) -> PyResult<&'a [T]> {
    slice.map_err(|_| PyValueError::new_err(format!("'{key}' must be a C-contiguous array")))
}

/// Masks `input_ids` (int64, 2-d, C-contiguous, writeable) in place and returns the labels
/// (int64, same shape). Special positions come from `special_tokens_mask` when given (nonzero:
/// special), else from `special_ids` (sorted). `offset_mapping` (rows x columns x 2) turns on
/// whole-word masking. The random stream is keyed by (seed, worker, batch).
#[pyfunction]
#[pyo3(signature = (
    input_ids, *, seed, worker, batch, mlm_probability, mask_replace_prob, random_replace_prob,
    mask_token_id, vocab_size, special_ids, special_tokens_mask=None, offset_mapping=None
))]
#[allow(clippy::too_many_arguments)]
pub fn mask_tokens<'py>(
    py: Python<'py>,
    input_ids: &Bound<'py, PyArray2<i64>>,
    seed: u64,
    worker: u64,
    batch: u64,
    mlm_probability: f64,
    mask_replace_prob: f64,
    random_replace_prob: f64,
    mask_token_id: i64,
    vocab_size: u64,
    special_ids: PyReadonlyArray1<'py, i64>,
    special_tokens_mask: Option<PyReadonlyArray2<'py, i64>>,
    offset_mapping: Option<PyReadonlyArray3<'py, i64>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (rows, columns) = (input_ids.shape()[0], input_ids.shape()[1]);
    if let Some(mask) = &special_tokens_mask {
        if mask.shape() != [rows, columns] {
            return Err(PyValueError::new_err(format!(
                "'special_tokens_mask' has shape {:?} but the padded 'input_ids' have {:?}",
                mask.shape(),
                [rows, columns]
            )));
        }
    }
    if let Some(offsets) = &offset_mapping {
        if offsets.shape() != [rows, columns, 2] {
            return Err(PyValueError::new_err(format!(
                "'offset_mapping' has shape {:?}; the padded 'input_ids' need {:?}",
                offsets.shape(),
                [rows, columns, 2]
            )));
        }
    }
    let ids = contiguous(special_ids.as_slice(), "special_ids")?;
    let special = match &special_tokens_mask {
        Some(mask) => Special::Flags(contiguous(mask.as_slice(), "special_tokens_mask")?),
        None => Special::Ids(ids),
    };
    let offsets = match &offset_mapping {
        Some(offsets) => Some(contiguous(offsets.as_slice(), "offset_mapping")?),
        None => None,
    };
    // Fails (instead of aliasing) when input_ids is read-only or is one of the arrays above.
    let mut writable = input_ids.try_readwrite().map_err(|err| {
        PyValueError::new_err(format!("'input_ids' cannot be masked in place: {err}"))
    })?;
    let values = writable
        .as_slice_mut()
        .map_err(|_| PyValueError::new_err("'input_ids' must be a C-contiguous array"))?;
    let options = MaskOptions {
        mlm_probability,
        mask_replace_prob,
        random_replace_prob,
        mask_token_id,
        vocab_size,
    };
    let labels = py.detach(|| {
        let mut rng = Xoshiro256PlusPlus::for_batch(seed, worker, batch);
        masking::mask_tokens(values, columns, &special, offsets, &options, &mut rng)
    })?;
    // The labels Vec moves into numpy: no copy.
    matrix(py, rows, columns, labels)
}

/// Atomically replaces `cells[index]` with `new` if it holds `current`, and returns the value
/// it held (equal to `current` exactly when the swap happened). `cells` is an int64 array in
/// memory that several processes map (a `multiprocessing` shared array): DataLoader workers
/// agree through it on which epoch a batch belongs to, with no lock to carry across fork or
/// spawn.
#[pyfunction]
pub fn compare_exchange<'py>(
    cells: &Bound<'py, PyArray1<i64>>,
    index: usize,
    current: i64,
    new: i64,
) -> PyResult<i64> {
    let mut writable = cells.try_readwrite().map_err(|err| {
        PyValueError::new_err(format!("compare_exchange needs writeable cells: {err}"))
    })?;
    let slice = writable
        .as_slice_mut()
        .map_err(|_| PyValueError::new_err("compare_exchange needs a C-contiguous int64 array"))?;
    let length = slice.len();
    let Some(cell) = slice.get_mut(index) else {
        return Err(PyValueError::new_err(format!(
            "compare_exchange: index {index} is out of range for {length} cells"
        )));
    };
    let cell: *mut i64 = cell;
    if (cell as usize) % std::mem::align_of::<AtomicI64>() != 0 {
        return Err(PyValueError::new_err(
            "compare_exchange needs 8-byte aligned int64 cells",
        ));
    }
    // SAFETY: a valid, exclusively borrowed cell, aligned (checked above); the processes that
    // share the memory touch these cells only atomically.
    let atomic = unsafe { AtomicI64::from_ptr(cell) };
    Ok(
        match atomic.compare_exchange(current, new, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(previous) | Err(previous) => previous,
        },
    )
}
