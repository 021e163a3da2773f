//! Binding for masked-LM masking: masks the padded `input_ids` array in place and hands the
//! labels buffer to numpy without a copy. `input_ids` is memory Python can move
//! (`ndarray.resize(..., refcheck=False)`, from another thread too), so it is written attached,
//! its checks read from the array's C fields first and nothing that runs Python code between its
//! slice and the last write; the other arrays are copied first.

use std::sync::atomic::{AtomicI64, Ordering};

use numpy::{PyArray1, PyArray2, PyArray3, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::core::masking::{self, MaskOptions, Special};
use crate::core::rng::Xoshiro256PlusPlus;
use crate::py::convert::array_values::OwnedArray1;
use crate::py::output::numpy_arrays::matrix;

/// The values of a C-contiguous int64 array, copied at once (attached, no Python code run).
fn copied<D: numpy::ndarray::Dimension>(
    array: &Bound<'_, numpy::PyArray<i64, D>>,
    key: &str,
) -> PyResult<Vec<i64>> {
    if !array.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "'{key}' must be a C-contiguous array"
        )));
    }
    // SAFETY: C-contiguous int64 (the cast); copied at once, attached, with no Python code run
    // in between, so nothing can move the array while it is read.
    unsafe { array.as_slice() }
        .map(<[i64]>::to_vec)
        .map_err(|_| PyValueError::new_err(format!("'{key}' must be a C-contiguous array")))
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
    special_ids: OwnedArray1<i64>,
    special_tokens_mask: Option<Bound<'py, PyArray2<i64>>>,
    offset_mapping: Option<Bound<'py, PyArray3<i64>>>,
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
    let mask = match &special_tokens_mask {
        Some(mask) => Some(copied(mask, "special_tokens_mask")?),
        None => None,
    };
    let offsets = match &offset_mapping {
        Some(offsets) => Some(copied(offsets, "offset_mapping")?),
        None => None,
    };
    let special = match &mask {
        Some(mask) => Special::Flags(mask),
        None => Special::Ids(&special_ids.0),
    };
    // The array's own C fields, not `flags` (which a subclass can answer).
    // SAFETY: a live array, its flags field read while it is held.
    let flags = unsafe { (*input_ids.as_array_ptr()).flags };
    if flags & numpy::npyffi::NPY_ARRAY_WRITEABLE == 0 {
        return Err(PyValueError::new_err(
            "'input_ids' cannot be masked in place: the array is read-only",
        ));
    }
    if !input_ids.is_c_contiguous() {
        return Err(PyValueError::new_err(
            "'input_ids' must be a C-contiguous array",
        ));
    }
    let options = MaskOptions {
        mlm_probability,
        mask_replace_prob,
        random_replace_prob,
        mask_token_id,
        vocab_size,
    };
    let labels = {
        // SAFETY: writeable, C-contiguous int64 (checked above, and the cast); written
        // attached, with no Python code run between this slice and the last write, so nothing
        // can move or read the array meanwhile; every other input is a copy, so nothing aliases.
        let values = unsafe { input_ids.as_slice_mut() }
            .map_err(|_| PyValueError::new_err("'input_ids' must be a C-contiguous array"))?;
        let mut rng = Xoshiro256PlusPlus::for_batch(seed, worker, batch);
        masking::mask_tokens(
            values,
            columns,
            &special,
            offsets.as_deref(),
            &options,
            &mut rng,
        )
    }?;
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
