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

/// The C methods `allocated_by_torch` calls, found once: `TensorBase.untyped_storage`,
/// `StorageBase.resizable` and the `DisableTorchFunction` type, each taken from torch's own C
/// types (static types, which no Python code can patch), checked to be C (a method descriptor,
/// a static type). None where this torch has no such thing.
struct StorageQuery {
    untyped_storage: Py<PyAny>,
    resizable: Py<PyAny>,
    disable: Py<PyAny>,
}

static STORAGE_QUERY: PyOnceLock<Option<StorageQuery>> = PyOnceLock::new();

/// Whether `ty` is a static (C, not heap-allocated) type: its attributes cannot be set.
fn is_static_type(ty: &Bound<'_, PyType>) -> bool {
    // SAFETY: a live type object.
    let flags = unsafe { ffi::PyType_GetFlags(ty.as_type_ptr()) };
    flags & ffi::Py_TPFLAGS_HEAPTYPE == 0
}

fn storage_query(py: Python<'_>) -> Option<&StorageQuery> {
    STORAGE_QUERY
        .get_or_init(py, || {
            let torch_c = py.import("torch._C").ok()?;
            let static_type = |name: &str| {
                let ty = torch_c.getattr(name).ok()?.cast_into::<PyType>().ok()?;
                is_static_type(&ty).then_some(ty)
            };
            let tensor_base = static_type("TensorBase")?;
            let storage_base = static_type("StorageBase")?;
            let disable = static_type("DisableTorchFunction")?;
            if !torch_tensor_type(py)?.is_subclass(&tensor_base).ok()? {
                return None;
            }
            // A C method's descriptor has the type `str.join`'s has.
            let method_descriptor = py
                .get_type::<pyo3::types::PyString>()
                .getattr("__dict__")
                .ok()?
                .get_item("join")
                .ok()?
                .get_type();
            let method = |ty: &Bound<'_, PyType>, name: &str| {
                let found = ty.getattr("__dict__").ok()?.get_item(name).ok()?;
                found
                    .get_type()
                    .is(&method_descriptor)
                    .then(|| found.unbind())
            };
            Some(StorageQuery {
                untyped_storage: method(&tensor_base, "untyped_storage")?,
                resizable: method(&storage_base, "resizable")?,
                disable: disable.into_any().unbind(),
            })
        })
        .as_ref()
}

/// Whether `tensor` (an exact `torch.Tensor`) lies in memory torch allocated itself (a
/// resizable storage), not a view of memory another owner lent it (a numpy array, a memory
/// map, a bytes object, DLPack), which may be read-only. Asked of torch's C methods with torch
/// functions off (see `StorageQuery`): a method patched onto `torch.Tensor` or
/// `torch.UntypedStorage`, a torch function mode or a subclass cannot answer it. An error where
/// this torch has no such methods.
pub(crate) fn allocated_by_torch(tensor: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = tensor.py();
    let query = storage_query(py).ok_or_else(|| {
        pyo3::exceptions::PyTypeError::new_err(
            "output buffers need torch's TensorBase.untyped_storage and \
             StorageBase.resizable C methods",
        )
    })?;
    let guard = query.disable.bind(py).call0()?;
    guard.call_method0(intern!(py, "__enter__"))?;
    let answer = (|| {
        let storage = query.untyped_storage.bind(py).call1((tensor,))?;
        let resizable = query.resizable.bind(py).call1((&storage,))?;
        Ok::<_, PyErr>(
            resizable
                .cast_exact::<pyo3::types::PyBool>()
                .is_ok_and(|b| b.is_true()),
        )
    })();
    guard.call_method1(intern!(py, "__exit__"), (py.None(), py.None(), py.None()))?;
    answer
}
