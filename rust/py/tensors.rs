//! torch tensors as the read paths see them: recognising one, viewing one as a numpy array,
//! reading integer tensors' values in place, and laying a batch's 1-d tensors end to end with
//! a single `torch.cat`.
//!
//! torch is never imported here: a tensor cannot exist before its user imported torch, so
//! `torch.Tensor` is looked up in `sys.modules` on first need.

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::{ffi, intern};

use super::dlpack::{self, IntType, IntView};
use super::read::IntValuesVisitor;

static TORCH_TENSOR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static TORCH_BOOL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static TORCH_CAT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static FORCE_KWARGS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
static INFERENCE_MODE: PyOnceLock<Option<Py<PyAny>>> = PyOnceLock::new();
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
/// tensor type has a Python metaclass), about a tenth of a one-row batch's native call. torch
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
    // plain `numpy()` takes: its argument parsing for `force=True` is a third of the call.
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
/// guard costs about as much as torch's autograd layer saves on 16 rows of a few hundred
/// values; for a batch of one or a few rows it was a fifth of the concatenation.
const INFERENCE_MODE_FROM: usize = 16;

/// torch's inference mode, on while the returned guard lives (`torch._C._InferenceMode`,
/// the object `torch.inference_mode` itself holds): torch then skips its autograd layer,
/// about a fifth of a `torch.cat` of a batch's rows. The result is only read here, so
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

/// `len(tensor)`: the first dimension's size, which is the number of values of a 1-d tensor;
/// None for a 0-d tensor (or any error).
///
/// Computed by torch's C type (`torch._C.TensorBase`) through its `mp_length` slot, found once
/// with `PyType_GetSlot`: a plain C call. `numel()` is a method call (its lookup, a call
/// through the interpreter, an int object) and torch.Tensor's own `__len__` runs Python, and
/// this runs once per row and key. `numel()` where the slot cannot be had.
fn tensor_length(tensor: &Bound<'_, PyAny>) -> Option<usize> {
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

/// Where torch has no DLPack exchange table: how many tensors a batch's pad group holds at
/// most for each to be read in place (`int_values`) rather than through one `torch.cat`.
/// Reading one then takes six calls into torch (about 0.65 µs: torch's dispatch checks,
/// argument parsing for the methods), while a `torch.cat` and its `numpy()` cost about 3 µs
/// however few the tensors, plus about 0.4 µs a tensor. Measured on 1-d int64 tensors of 230
/// values, three keys a row (A/B against the `torch.cat` path alone): 0.69x the collator
/// call's time at batch 1, 0.77x at 2, 0.90x at 4, 0.95x at 6, 1.05x at 8, 1.25x at 16 rows.
/// With the table (one C call and `is_neg()` a tensor), reading in place is faster at every
/// size: 0.62-0.84x from 1 to 64 rows.
pub(crate) const READ_IN_PLACE_UP_TO: usize = 16;

/// torch's integer dtype objects (those this torch has), each with its element type: how a
/// tensor's dtype is told where torch has no DLPack exchange table.
static INT_DTYPES: PyOnceLock<Vec<(Py<PyAny>, IntType)>> = PyOnceLock::new();

fn int_dtype(dtype: &Bound<'_, PyAny>) -> Option<IntType> {
    let py = dtype.py();
    let known = INT_DTYPES.get_or_init(py, || {
        let Ok(torch) = py.import("torch") else {
            return Vec::new();
        };
        [
            ("int8", IntType::I8),
            ("int16", IntType::I16),
            ("int32", IntType::I32),
            ("int64", IntType::I64),
            ("uint8", IntType::U8),
            ("uint16", IntType::U16),
            ("uint32", IntType::U32),
            ("uint64", IntType::U64),
        ]
        .into_iter()
        .filter_map(|(name, kind)| Some((torch.getattr(name).ok()?.unbind(), kind)))
        .collect()
    });
    known
        .iter()
        .find(|(object, _)| object.bind(py).is(dtype))
        .map(|&(_, kind)| kind)
}

/// An integer CPU tensor's values, read in place: the tensor (kept alive while they are
/// read), where its first value is, how many there are and their type.
pub(crate) struct TensorInts<'py> {
    _tensor: Bound<'py, PyAny>,
    view: IntView,
}

impl TensorInts<'_> {
    pub fn len(&self) -> usize {
        self.view.len
    }

    /// Hands `visitor` the values, as `read::with_int_values` hands it an array's.
    pub fn visit<V: IntValuesVisitor>(&self, visitor: V) -> V::Output {
        /// SAFETY (for each use): `int_values` checked that `data` is non-null and aligned
        /// for `T`, and that `len` values of `T` lie there, contiguous, in the storage of
        /// the tensor this holds a reference to; the interpreter stays attached (a `'py`
        /// borrow) while they are read, as a numpy array's are.
        unsafe fn values<'a, T>(data: *const u8, len: usize) -> &'a [T] {
            std::slice::from_raw_parts(data.cast::<T>(), len)
        }
        let IntView {
            data,
            len,
            int_type,
        } = self.view;
        unsafe {
            match int_type {
                IntType::I8 => visitor.visit(values::<i8>(data, len)),
                IntType::I16 => visitor.visit(values::<i16>(data, len)),
                IntType::I32 => visitor.visit(values::<i32>(data, len)),
                IntType::I64 => visitor.visit(values::<i64>(data, len)),
                IntType::U8 => visitor.visit(values::<u8>(data, len)),
                IntType::U16 => visitor.visit(values::<u16>(data, len)),
                IntType::U32 => visitor.visit(values::<u32>(data, len)),
                IntType::U64 => visitor.visit(values::<u64>(data, len)),
            }
        }
    }
}

/// Whether `tensor` can be read in place as far as Python-level answers go: an exact
/// `torch.Tensor` without a pending negation (`torch._neg_view`, which `numpy()`, `tolist()`
/// and `torch.cat` would apply). The first of the two steps of an in-place read: callers ask
/// this of every tensor they will read before taking any view (`int_values`), so that no
/// Python code runs between taking a view and reading through it.
///
/// `is_neg()` is asked through `torch._C.TensorBase`'s own method (see `base_attributes`), so a
/// method patched onto `torch.Tensor` is not called; a torch function mode is not called
/// either while a `ModesOff` guard is held, which every caller holds (see `modes_off`).
pub(crate) fn readable_in_place(tensor: &Bound<'_, PyAny>) -> bool {
    let py = tensor.py();
    let (Some(tensor_type), Some(base)) = (torch_tensor_type(py), base_attributes(py)) else {
        return false;
    };
    if !is_exact_tensor(tensor, tensor_type) {
        return false;
    }
    base.is_neg
        .bind(py)
        .call1((tensor,))
        .and_then(|negated| negated.extract::<bool>())
        .is_ok_and(|negated| !negated)
}

/// A tensor's values read in place, when it is a contiguous `ndim`-dimensional (0 or 1) CPU
/// tensor of an integer dtype; None for anything else, or on any error (the caller then reads
/// the tensor another way, which reports problems). The second step of an in-place read: the
/// caller has checked `readable_in_place` for this tensor (and for every other it reads) and
/// reads the values before any Python code runs.
///
/// torch's DLPack exchange table describes the tensor in one C call (see `dlpack::int_view`),
/// which no `__torch_function__` can answer for. Without the table, five attributes read
/// through `torch._C.TensorBase`'s own descriptors (CPU, rank, dtype, contiguity, data
/// pointer) with torch function modes off (`ModesOff`) find the same.
pub(crate) fn int_values<'py>(tensor: &Bound<'py, PyAny>, ndim: usize) -> Option<TensorInts<'py>> {
    let py = tensor.py();
    if !is_exact_tensor(tensor, torch_tensor_type(py)?) {
        return None;
    }
    let view = match dlpack::int_view(tensor, ndim) {
        Ok(view) => view?,
        Err(()) => described_by_the_tensor(tensor, ndim)?,
    };
    Some(TensorInts {
        _tensor: tensor.clone(),
        view,
    })
}

/// `torch._C.TensorBase`'s own attributes that the in-place reads ask a tensor: the C
/// descriptors torch defines, which a method or property patched onto `torch.Tensor` does not
/// replace. Taken once, and only when each is a C descriptor (not a Python function put on
/// `TensorBase` before the first read); None otherwise, and no tensor is then read in place.
struct BaseAttributes {
    is_neg: Py<PyAny>,
    is_cpu: Py<PyAny>,
    ndim: Py<PyAny>,
    dtype: Py<PyAny>,
    is_contiguous: Py<PyAny>,
    data_ptr: Py<PyAny>,
}

static BASE_ATTRIBUTES: PyOnceLock<Option<BaseAttributes>> = PyOnceLock::new();

fn base_attributes(py: Python<'_>) -> Option<&BaseAttributes> {
    BASE_ATTRIBUTES
        .get_or_init(py, || {
            let base = py.import("torch._C").ok()?.getattr("TensorBase").ok()?;
            let namespace = base.getattr("__dict__").ok()?;
            let own = |name: &str| -> Option<Py<PyAny>> {
                let descriptor = namespace.get_item(name).ok()?;
                // A C descriptor's type is a static type; a Python function's is not.
                // SAFETY: a live type object's flags are read.
                let flags = unsafe { ffi::PyType_GetFlags(descriptor.get_type().as_type_ptr()) };
                (flags & ffi::Py_TPFLAGS_HEAPTYPE == 0).then(|| descriptor.unbind())
            };
            Some(BaseAttributes {
                is_neg: own("is_neg")?,
                is_cpu: own("is_cpu")?,
                ndim: own("ndim")?,
                dtype: own("dtype")?,
                is_contiguous: own("is_contiguous")?,
                data_ptr: own("data_ptr")?,
            })
        })
        .as_ref()
}

/// `dlpack::int_view` for a torch without the exchange table: the tensor's own attributes,
/// through `TensorBase`'s descriptors (see `base_attributes`), with torch function modes off.
fn described_by_the_tensor(tensor: &Bound<'_, PyAny>, ndim: usize) -> Option<IntView> {
    let py = tensor.py();
    let base = base_attributes(py)?;
    let property = |descriptor: &Py<PyAny>| {
        descriptor
            .bind(py)
            .call_method1(intern!(py, "__get__"), (tensor,))
            .ok()
    };
    let method = |descriptor: &Py<PyAny>| descriptor.bind(py).call1((tensor,)).ok();
    // On the CPU first: any other device's data pointer is not host memory.
    if !property(&base.is_cpu)?.extract::<bool>().ok()? {
        return None;
    }
    let dims: usize = property(&base.ndim)?.extract().ok()?;
    if dims != ndim {
        return None;
    }
    let int_type = int_dtype(&property(&base.dtype)?)?;
    if !method(&base.is_contiguous)?.extract::<bool>().ok()? {
        return None;
    }
    let len = if ndim == 0 { 1 } else { tensor_length(tensor)? };
    let address: usize = method(&base.data_ptr)?.extract().ok()?;
    // An empty tensor may have no storage: any aligned, non-null address reads no value.
    let address = if len == 0 { int_type.size() } else { address };
    if address == 0 || address % int_type.size() != 0 {
        return None;
    }
    Some(IntView {
        data: address as *const u8,
        len,
        int_type,
    })
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
