//! torch seen from the read paths without importing it (a tensor cannot exist before its user
//! imported torch, so `torch.Tensor` is looked up in `sys.modules` on first need): the tensor
//! type, a tensor's length through torch's C slot, its numpy view, and torch function modes
//! turned off while rows are read.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use pyo3::{ffi, intern};

static TORCH_TENSOR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static FORCE_KWARGS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
static TENSOR_LENGTH: PyOnceLock<Option<ffi::lenfunc>> = PyOnceLock::new();

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

/// Whether `value` is a `torch.Tensor` (or an instance of a subclass). Asked of every key's
/// first value, lists included: the type's MRO is walked in C (`PyType_IsSubtype`), where
/// `isinstance` would first look up and call the metaclass's `__instancecheck__` (torch's
/// tensor type has a Python metaclass), a cost paid per batch that adds up on small ones. torch
/// defines no `__instancecheck__` of its own for `torch.Tensor`, so the answers are the same.
pub fn is_torch_tensor(value: &Bound<'_, PyAny>) -> bool {
    torch_tensor_type(value.py()).is_some_and(|tensor_type| {
        // SAFETY: both are live type objects.
        unsafe {
            ffi::PyType_IsSubtype(value.get_type().as_type_ptr(), tensor_type.as_type_ptr()) != 0
        }
    })
}

/// Whether `value` is a `torch.Tensor` itself: a subclass may override torch functions.
pub(crate) fn is_exact_tensor(value: &Bound<'_, PyAny>, tensor_type: &Bound<'_, PyType>) -> bool {
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

/// `len(tensor)`: the first dimension's size, which is the number of values of a 1-d tensor;
/// None for a 0-d tensor (or any error).
///
/// Computed by torch's C type (`torch._C.TensorBase`) through its `mp_length` slot, found once
/// with `PyType_GetSlot`: a plain C call. `numel()` is a method call (its lookup, a call
/// through the interpreter, an int object) and torch.Tensor's own `__len__` runs Python, and
/// this runs once per row and key. `numel()` where the slot cannot be had.
pub(crate) fn tensor_length(tensor: &Bound<'_, PyAny>) -> Option<usize> {
    let py = tensor.py();
    let slot = TENSOR_LENGTH.get_or_init(py, || {
        let base = py
            .import("torch._C")
            .and_then(|c| c.getattr("TensorBase"))
            .ok()?
            .cast_into::<PyType>()
            .ok()?;
        if !torch_tensor_type(py)?.is_subclass(&base).ok()? {
            return None;
        }
        // SAFETY: `base` is a live type object; a type without the slot gives null, and a
        // failed lookup (a static type before Python 3.10) sets an error, cleared here.
        let slot = unsafe { ffi::PyType_GetSlot(base.as_type_ptr(), ffi::Py_mp_length) };
        if slot.is_null() {
            drop(PyErr::take(py));
            return None;
        }
        // SAFETY: the `mp_length` slot holds a `lenfunc`.
        Some(unsafe { std::mem::transmute::<*mut std::ffi::c_void, ffi::lenfunc>(slot) })
    });
    let Some(length) = slot else {
        return tensor
            .call_method0(intern!(py, "numel"))
            .ok()?
            .extract::<usize>()
            .ok();
    };
    // SAFETY: the caller passes an exact torch.Tensor, an instance of the slot's own type
    // (checked above); the slot returns -1 with an error set on failure.
    let value = unsafe { length(tensor.as_ptr()) };
    if value < 0 {
        drop(PyErr::take(py));
        return None;
    }
    usize::try_from(value).ok()
}

static MODE_ENABLED: PyOnceLock<Option<Py<PyAny>>> = PyOnceLock::new();
static DISABLE_TORCH_FUNCTION: PyOnceLock<Option<Py<PyAny>>> = PyOnceLock::new();

/// torch function modes (`TorchFunctionMode`, and the `torch.device` context, which is one)
/// and tensor subclasses' `__torch_function__` turned off while it lives
/// (`torch._C.DisableTorchFunction`, thread-local in torch): nothing the read paths ask a
/// tensor (`is_neg()`, `len()`, `dim()`, `dtype`, `numpy()`, `torch.cat`, ...) then runs
/// Python code of the caller's, which could answer falsely or move a tensor's storage while
/// its values are read. Does nothing when no mode is on (the usual case: one C call to find
/// out) or torch is not imported.
pub(crate) struct ModesOff<'py> {
    entered: Option<Bound<'py, PyAny>>,
}

impl Drop for ModesOff<'_> {
    fn drop(&mut self) {
        if let Some(guard) = self.entered.take() {
            let py = guard.py();
            if let Err(err) =
                guard.call_method1(intern!(py, "__exit__"), (py.None(), py.None(), py.None()))
            {
                err.write_unraisable(py, Some(&guard));
            }
        }
    }
}

/// Turns torch function modes off for the read that follows (see `ModesOff`): taken by every
/// read of rows (`collate`, `gather`) before the first tensor is touched.
pub(crate) fn modes_off(py: Python<'_>) -> PyResult<ModesOff<'_>> {
    let off = ModesOff { entered: None };
    if torch_tensor_type(py).is_none() {
        return Ok(off);
    }
    let torch_c = || py.import("torch._C").ok();
    let enabled = MODE_ENABLED.get_or_init(py, || {
        Some(
            torch_c()?
                .getattr("_is_torch_function_mode_enabled")
                .ok()?
                .unbind(),
        )
    });
    // A torch without the query has no modes.
    let Some(enabled) = enabled else {
        return Ok(off);
    };
    if !enabled.bind(py).call0()?.is_truthy()? {
        return Ok(off);
    }
    let disable = DISABLE_TORCH_FUNCTION.get_or_init(py, || {
        Some(torch_c()?.getattr("DisableTorchFunction").ok()?.unbind())
    });
    let Some(disable) = disable else {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "a torch function mode is on and this torch cannot turn it off for the read",
        ));
    };
    let guard = disable.bind(py).call0()?;
    guard.call_method0(intern!(py, "__enter__"))?;
    Ok(ModesOff {
        entered: Some(guard),
    })
}
