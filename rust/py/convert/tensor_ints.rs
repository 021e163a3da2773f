//! Integer torch tensors read in place: a CPU tensor's values viewed where they lie (through
//! torch's DLPack exchange table, or `TensorBase`'s own attributes without it) and handed to
//! an `IntValuesVisitor` as a slice, without `numpy()` or `torch.cat`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::{ffi, intern};

use super::array_values::IntValuesVisitor;
use super::dlpack::{self, IntType, IntView};
use super::torch::{is_exact_tensor, tensor_length, torch_tensor_type};

/// Where torch has no DLPack exchange table: how many tensors a batch's pad group holds at
/// most for each to be read in place (`int_values`) rather than through one `torch.cat`.
/// Reading one then takes six calls into torch (each through torch's dispatch checks and
/// argument parsing), while a `torch.cat` and its `numpy()` cost a fixed amount however few
/// the tensors plus a little a tensor: in place wins on small batches, the concatenation on
/// large ones, and this is where they cross (see CHANGELOG). With the table (one C call and
/// `is_neg()` a tensor) every batch is read in place.
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

    /// Hands `visitor` the values, as `array_values::with_int_values` hands it an array's.
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
        // SAFETY: `values`' contract holds for the view this was made with (see above), and
        // `int_type` is the element type `int_values` found, so `T` is the values' own type.
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

/// A tensor's rank, read through `torch._C.TensorBase`'s own `ndim` descriptor (see
/// `base_attributes`): a `dim` or `ndim` patched onto `torch.Tensor` is not asked, and a torch
/// function mode is not either while a `ModesOff` guard is held. None where it cannot be read
/// so (the caller then asks the tensor).
pub(crate) fn tensor_ndim(tensor: &Bound<'_, PyAny>) -> Option<usize> {
    let py = tensor.py();
    base_attributes(py)?
        .ndim
        .bind(py)
        .call_method1(intern!(py, "__get__"), (tensor,))
        .ok()?
        .extract()
        .ok()
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
