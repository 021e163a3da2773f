//! A batch's 1-d torch tensors laid end to end by a single `torch.cat` and read as one numpy
//! array: one call into torch for a key (or several keys) instead of one or more per row.

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;

use super::torch::{is_exact_tensor, tensor_as_numpy, tensor_length, torch_tensor_type};

static TORCH_BOOL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static TORCH_CAT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static INFERENCE_MODE: PyOnceLock<Option<Py<PyAny>>> = PyOnceLock::new();

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
/// a call into torch per row.
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
            let length = tensor_length(tensor)?;
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
    let flat = {
        // Worth its own cost (a guard object made and dropped) from about 16 tensors on.
        let _guard = (all.len() >= INFERENCE_MODE_FROM).then(|| inference_mode(py));
        cat.bind(py).call1((PyTuple::new(py, all).ok()?,)).ok()?
    };
    // The concatenation is a fresh CPU tensor without autograd history (inference mode), which
    // plain `numpy()` takes, skipping the argument parsing `force=True` costs.
    let array = flat
        .call_method0(intern!(py, "numpy"))
        .or_else(|_| tensor_as_numpy(&flat))
        .ok()?
        .cast_into::<PyUntypedArray>()
        .ok()?;
    // A 1-d result means every row was 1-d (torch.cat needs equal ranks, and skips only empty
    // 1-d tensors), so each row's `len()` was its number of values.
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

/// How many tensors a `torch.cat` takes before `inference_mode` pays: making and dropping the
/// guard costs about as much as torch's autograd layer saves on a batch of this many rows of a
/// few hundred values, and more than it saves on fewer.
const INFERENCE_MODE_FROM: usize = 16;

/// torch's inference mode, on while the returned guard lives (`torch._C._InferenceMode`,
/// the object `torch.inference_mode` itself holds): torch then skips its autograd layer. The
/// result is only read here, so
/// what inference mode changes about it (no autograd history, no later in-place use in
/// autograd) does not matter. None when this torch has no such guard: everything works
/// without it.
fn inference_mode(py: Python<'_>) -> Option<Bound<'_, PyAny>> {
    let guard_type = INFERENCE_MODE.get_or_init(py, || {
        py.import("torch._C")
            .and_then(|c| c.getattr("_InferenceMode"))
            .ok()
            .map(Bound::unbind)
    });
    guard_type.as_ref()?.bind(py).call1((true,)).ok()
}
