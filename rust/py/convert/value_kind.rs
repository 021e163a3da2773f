//! What a row's value is: the one place that decides it, from the value's exact type (its type
//! pointer compared with the few types the readers know), before anything reads the value.
//! Every reader dispatches on the answer; none asks the type again.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyTuple, PyType};

use super::torch::torch_tensor_type;

/// The kinds of value a row holds under a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A Python list.
    List,
    /// A Python tuple.
    Tuple,
    /// A numpy array.
    Array,
    /// A torch tensor.
    Tensor,
    /// A Python int (not a bool).
    Int,
    /// A Python bool.
    Bool,
    /// A Python float.
    Float,
    /// An exact `np.int64` scalar (which reads as a Python int does).
    NumpyInt64,
    /// Any other numpy scalar (`np.float32(1.5)`, `np.bool_(True)`, ...).
    NumpyScalar,
    /// Anything else (a string, None, a mapping, ...).
    Other,
}

/// A value's kind, and whether its type is the kind's type itself (`exact`) rather than a
/// subclass of it, which may override what a reader relies on (`__len__`, `__iter__`, torch
/// functions): the strict readers take exact values only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueKind {
    pub kind: Kind,
    pub exact: bool,
}

impl ValueKind {
    /// An exact list or tuple: read item by item from its item array.
    pub fn is_exact_sequence(self) -> bool {
        self.exact && matches!(self.kind, Kind::List | Kind::Tuple)
    }
}

/// numpy's scalar types the classification compares against.
struct NumpyTypes {
    generic: Py<PyType>,
    int64: Py<PyType>,
}

static NUMPY_TYPES: PyOnceLock<Option<NumpyTypes>> = PyOnceLock::new();

fn numpy_types(py: Python<'_>) -> Option<&NumpyTypes> {
    NUMPY_TYPES
        .get_or_init(py, || {
            let np = py.import("numpy").ok()?;
            let get = |name: &str| -> Option<Py<PyType>> {
                Some(np.getattr(name).ok()?.cast_into::<PyType>().ok()?.unbind())
            };
            Some(NumpyTypes {
                generic: get("generic")?,
                int64: get("int64")?,
            })
        })
        .as_ref()
}

/// What `value` is (see `Kind`). Exact Python types are told apart by their type pointer
/// alone; subclasses, numpy's and torch's types by a C-level subtype check; nothing here runs
/// Python code.
#[inline]
pub fn value_kind(value: &Bound<'_, PyAny>) -> ValueKind {
    let exact = |kind| ValueKind { kind, exact: true };
    let subclass = |kind| ValueKind { kind, exact: false };
    // The common cases first, by type pointer.
    if value.is_exact_instance_of::<PyList>() {
        return exact(Kind::List);
    }
    if value.is_exact_instance_of::<PyInt>() {
        return exact(Kind::Int);
    }
    if value.is_exact_instance_of::<PyTuple>() {
        return exact(Kind::Tuple);
    }
    let py = value.py();
    let value_type = value.get_type();
    if value_type.is(py.get_type::<PyUntypedArray>()) {
        return exact(Kind::Array);
    }
    if let Some(tensor) = torch_tensor_type(py) {
        if value_type.is(tensor) {
            return exact(Kind::Tensor);
        }
    }
    if value.is_exact_instance_of::<PyBool>() {
        return exact(Kind::Bool);
    }
    if value.is_exact_instance_of::<PyFloat>() {
        return exact(Kind::Float);
    }
    if let Some(np) = numpy_types(py) {
        if value_type.is(np.int64.bind(py)) {
            return exact(Kind::NumpyInt64);
        }
    }
    // Subclasses and foreign types: a C-level subtype check each.
    if value.is_instance_of::<PyBool>() {
        return subclass(Kind::Bool);
    }
    if value.is_instance_of::<PyInt>() {
        return subclass(Kind::Int);
    }
    if value.is_instance_of::<PyFloat>() {
        return subclass(Kind::Float);
    }
    if value.is_instance_of::<PyList>() {
        return subclass(Kind::List);
    }
    if value.is_instance_of::<PyTuple>() {
        return subclass(Kind::Tuple);
    }
    if value.is_instance_of::<PyUntypedArray>() {
        return subclass(Kind::Array);
    }
    if super::torch::is_torch_tensor(value) {
        return subclass(Kind::Tensor);
    }
    if numpy_number(value) == Some(false) {
        return exact(Kind::NumpyScalar);
    }
    ValueKind {
        kind: Kind::Other,
        exact: true,
    }
}

/// The length of an exact list or tuple, and whether it is a list; None for any other value.
/// The one length check of the strict readers.
#[inline]
pub fn exact_sequence(value: &Bound<'_, PyAny>) -> Option<(usize, bool)> {
    if let Ok(list) = value.cast_exact::<PyList>() {
        return Some((list.len(), true));
    }
    value.cast_exact::<PyTuple>().ok().map(|t| (t.len(), false))
}

/// The length of an exact 1-d numpy array; None for any other value.
#[inline]
pub fn exact_vector(value: &Bound<'_, PyAny>) -> Option<usize> {
    let py = value.py();
    if !value.get_type().is(py.get_type::<PyUntypedArray>()) {
        return None;
    }
    let array = value.cast::<PyUntypedArray>().ok()?;
    (array.ndim() == 1).then(|| array.len())
}

/// Whether `value` is a numpy scalar (an instance of `np.generic`), and whether it is an
/// exact `np.int64` (which reads as a Python int does).
pub fn numpy_number(value: &Bound<'_, PyAny>) -> Option<bool> {
    let py = value.py();
    let np = numpy_types(py)?;
    let value_type = value.get_type();
    if value_type.is(np.int64.bind(py)) {
        return Some(true);
    }
    // `np.generic`'s metaclass is `type`: no `__subclasscheck__` of numpy's runs.
    let generic = value_type.is_subclass(np.generic.bind(py)).unwrap_or(false);
    generic.then_some(false)
}
