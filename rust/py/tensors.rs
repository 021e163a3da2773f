//! torch tensors as the read paths see them: recognising one, viewing one as a numpy array,
//! and laying a batch's 1-d tensors end to end with a single `torch.cat`.
//!
//! torch is never imported here: a tensor cannot exist before its user imported torch, so
//! `torch.Tensor` is looked up in `sys.modules` on first need.

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

static TORCH_TENSOR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static TORCH_BOOL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static TORCH_CAT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static FORCE_KWARGS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// torch.Tensor, once torch has been imported by someone.
pub fn torch_tensor_type(py: Python<'_>) -> Option<&Bound<'_, PyType>> {
    if let Some(t) = TORCH_TENSOR.get(py) {
        return Some(t.bind(py));
    }
    let modules = py.import("sys").ok()?.getattr("modules").ok()?;
    let torch = modules.cast::<PyDict>().ok()?.get_item("torch").ok()??;
    let tensor = torch
        .getattr("Tensor")
        .ok()?
        .cast_into::<PyType>()
        .ok()?
        .unbind();
    Some(TORCH_TENSOR.get_or_init(py, || tensor).bind(py))
}

pub fn is_torch_tensor(value: &Bound<'_, PyAny>) -> bool {
    torch_tensor_type(value.py()).is_some_and(|t| value.is_instance(t).unwrap_or(false))
}

/// Whether `value` is a `torch.Tensor` itself: a subclass may override torch functions.
fn is_exact_tensor(value: &Bound<'_, PyAny>, tensor_type: &Bound<'_, PyType>) -> bool {
    value.get_type().is(tensor_type)
}

/// Turns a torch tensor into a numpy array sharing its memory (copying only off-CPU tensors).
pub fn tensor_as_numpy<'py>(tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = tensor.py();
    // One `{"force": True}` for every call: torch's argument parser only reads it.
    let kwargs = FORCE_KWARGS.get_or_try_init(py, || -> PyResult<_> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("force", true)?;
        Ok(kwargs.unbind())
    })?;
    tensor.call_method(intern!(py, "numpy"), (), Some(kwargs.bind(py)))
}

/// One key's 1-d tensors laid end to end in a numpy array (which other keys' rows may share):
/// the key's values start at `offset`, then come row by row, `lengths[row]` each.
pub(crate) struct ConcatenatedRows<'py> {
    pub array: Bound<'py, PyUntypedArray>,
    pub offset: usize,
    pub lengths: Vec<usize>,
}

/// Every key's tensors (one per row) concatenated by one `torch.cat`, with each key's place
/// and row lengths; `None` when that does not give each row's own values.
///
/// Taken: exact 1-d tensors whose concatenation is an integer or bool array (integer
/// promotion keeps every value; a bool result means every row was bool). A float result is
/// taken for a single key whose rows share one dtype (promotion could round an int64 or
/// float64 value). Several keys are concatenated only when none starts with a bool row, so a
/// key of bools is never turned into integers by its neighbours (the general path keeps it
/// bool when nothing is padded, as transformers does). 0-d tensors (labels) are left to
/// `read::read_tensor_scalars`.
///
/// A tensor's dtype is not looked at row by row: the result's dtype settles it, which saves
/// a call into torch per row (a seventh of the batch's time for `set_format("torch")` rows).
/// Nothing here raises for the rows' sake: anything torch refuses (ranks, devices, dtypes
/// numpy lacks) gives `None`, and the caller reads row by row, reporting it with its row.
pub(crate) fn concatenate_tensors<'py>(
    keys: &[&[Bound<'py, PyAny>]],
) -> Option<Vec<ConcatenatedRows<'py>>> {
    let py = keys.first()?.first()?.py();
    let tensor_type = torch_tensor_type(py)?;
    let torch_bool = TORCH_BOOL
        .get_or_try_init(py, || -> PyResult<_> {
            Ok(py.import("torch")?.getattr("bool")?.unbind())
        })
        .ok()?
        .bind(py);
    let several = keys.len() > 1;
    let mut concatenated = Vec::with_capacity(keys.len());
    let mut total = 0usize;
    for tensors in keys {
        let first = tensors.first()?;
        if !is_exact_tensor(first, tensor_type)
            || first
                .call_method0(intern!(py, "dim"))
                .ok()?
                .extract::<usize>()
                .ok()?
                != 1
        {
            return None;
        }
        if several && first.getattr(intern!(py, "dtype")).ok()?.is(torch_bool) {
            return None;
        }
        let mut lengths = Vec::with_capacity(tensors.len());
        let offset = total;
        for tensor in *tensors {
            if !is_exact_tensor(tensor, tensor_type) {
                return None;
            }
            let length = tensor
                .call_method0(intern!(py, "numel"))
                .ok()?
                .extract::<usize>()
                .ok()?;
            lengths.push(length);
            total = total.checked_add(length)?;
        }
        concatenated.push((offset, lengths));
    }
    let all: Vec<&Bound<'py, PyAny>> = keys.iter().flat_map(|tensors| tensors.iter()).collect();
    let cat = TORCH_CAT
        .get_or_try_init(py, || -> PyResult<_> {
            Ok(py.import("torch")?.getattr("cat")?.unbind())
        })
        .ok()?;
    let flat = cat.bind(py).call1((PyTuple::new(py, all).ok()?,)).ok()?;
    let array = tensor_as_numpy(&flat)
        .ok()?
        .cast_into::<PyUntypedArray>()
        .ok()?;
    // A 1-d result means every row was 1-d (torch.cat needs equal ranks, and skips only empty
    // 1-d tensors).
    if array.ndim() != 1 || array.len() != total {
        return None;
    }
    let exact = match array.dtype().kind() {
        // Integer promotion keeps every value; a bool result means every row was bool.
        b'i' | b'u' | b'b' => true,
        _ => !several && one_dtype(keys[0])?,
    };
    exact.then(|| {
        concatenated
            .into_iter()
            .map(|(offset, lengths)| ConcatenatedRows {
                array: array.clone(),
                offset,
                lengths,
            })
            .collect()
    })
}

/// Whether the tensors share one dtype.
fn one_dtype(tensors: &[Bound<'_, PyAny>]) -> Option<bool> {
    let py = tensors.first()?.py();
    let dtype = tensors[0].getattr(intern!(py, "dtype")).ok()?;
    for tensor in &tensors[1..] {
        if !tensor.getattr(intern!(py, "dtype")).ok()?.is(&dtype) {
            return Some(false);
        }
    }
    Some(true)
}
