//! Reading Python row values into core columns, attached to the interpreter.
//!
//! Fast paths: lists/tuples of Python ints, numpy arrays of any integer/float/bool dtype (strided
//! or not), CPU torch tensors (through `Tensor.numpy(force=True)`, which shares memory), and
//! scalars. Anything else is "not numeric", which the caller may keep as a raw Python object.

use numpy::{PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple, PyType};

use crate::core::column::{Column, Shape};
use crate::core::error::CollateError;

/// Why a value could not be read. `NotNumeric` values may be kept raw by the caller; the others
/// are errors in any case.
pub enum ReadError {
    NotNumeric(CollateError),
    Fatal(CollateError),
    Python(PyErr),
}

impl From<PyErr> for ReadError {
    fn from(err: PyErr) -> Self {
        ReadError::Python(err)
    }
}

/// numpy's abstract scalar types, for numpy scalars (np.int64(3), np.bool_(True), ...).
struct NumpyScalarTypes {
    integer: Py<PyType>,
    floating: Py<PyType>,
    bool_: Py<PyType>,
}

static NUMPY_SCALARS: PyOnceLock<NumpyScalarTypes> = PyOnceLock::new();
static TORCH_TENSOR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn numpy_scalars(py: Python<'_>) -> PyResult<&NumpyScalarTypes> {
    NUMPY_SCALARS.get_or_try_init(py, || {
        let np = py.import("numpy")?;
        Ok(NumpyScalarTypes {
            integer: np.getattr("integer")?.cast_into::<PyType>()?.unbind(),
            floating: np.getattr("floating")?.cast_into::<PyType>()?.unbind(),
            bool_: np.getattr("bool_")?.cast_into::<PyType>()?.unbind(),
        })
    })
}

/// torch.Tensor, once torch has been imported by someone (a tensor cannot exist before that).
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

/// Where a value is being read, for error messages.
pub struct Site<'a> {
    pub key: &'a str,
    pub row: usize,
}

impl Site<'_> {
    fn not_a_number(&self, position: usize, value: &Bound<'_, PyAny>) -> ReadError {
        let type_name = value
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "object".into());
        ReadError::NotNumeric(CollateError::NotANumber {
            key: self.key.into(),
            row: self.row,
            position,
            type_name,
        })
    }

    fn overflow(&self, position: usize) -> ReadError {
        ReadError::Fatal(CollateError::Overflow {
            key: self.key.into(),
            row: self.row,
            position,
        })
    }

    fn too_deep(&self) -> ReadError {
        ReadError::NotNumeric(CollateError::TooDeep {
            key: self.key.into(),
            row: self.row,
        })
    }
}

enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

/// Reads one number. `Ok(None)`: not a number at all.
fn read_scalar(
    item: &Bound<'_, PyAny>,
    site: &Site<'_>,
    position: usize,
) -> Result<Option<Scalar>, ReadError> {
    if let Ok(b) = item.cast_exact::<PyBool>() {
        return Ok(Some(Scalar::Bool(b.is_true())));
    }
    if item.is_instance_of::<PyInt>() {
        return match item.extract::<i64>() {
            Ok(v) => Ok(Some(Scalar::Int(v))),
            Err(_) => Err(site.overflow(position)),
        };
    }
    if let Ok(f) = item.cast::<PyFloat>() {
        return Ok(Some(Scalar::Float(f.value())));
    }
    let py = item.py();
    let np = numpy_scalars(py)?;
    if item.is_instance(np.integer.bind(py))? {
        return match item.extract::<i64>() {
            Ok(v) => Ok(Some(Scalar::Int(v))),
            Err(_) => Err(site.overflow(position)),
        };
    }
    if item.is_instance(np.floating.bind(py))? {
        return Ok(Some(Scalar::Float(item.extract::<f64>()?)));
    }
    if item.is_instance(np.bool_.bind(py))? {
        return Ok(Some(Scalar::Bool(item.is_truthy()?)));
    }
    Ok(None)
}

fn push_scalar(column: &mut Column, scalar: Scalar) {
    match scalar {
        Scalar::Bool(v) => column.push_bool(v),
        Scalar::Int(v) => column.push_int(v),
        Scalar::Float(v) => column.push_float(v),
    }
}

fn read_sequence_items<'py>(
    column: &mut Column,
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    site: &Site<'_>,
) -> Result<(), ReadError> {
    for (position, item) in items.enumerate() {
        // Exact ints first: by far the most common element (token ids).
        if let Ok(int) = item.cast_exact::<PyInt>() {
            match int.extract::<i64>() {
                Ok(v) => column.push_int(v),
                Err(_) => return Err(site.overflow(position)),
            }
            continue;
        }
        match read_scalar(&item, site, position)? {
            Some(scalar) => push_scalar(column, scalar),
            None if item.is_instance_of::<PyList>()
                || item.is_instance_of::<PyTuple>()
                || item.is_instance_of::<PyUntypedArray>()
                || is_torch_tensor(&item) =>
            {
                return Err(site.too_deep())
            }
            None => return Err(site.not_a_number(position, &item)),
        }
    }
    Ok(())
}

fn extend_from<T: numpy::Element + Copy>(
    array: &Bound<'_, PyUntypedArray>,
    mut push: impl FnMut(&[T]),
) -> Result<bool, ReadError> {
    let Ok(typed) = array.cast::<PyArray1<T>>() else {
        return Ok(false);
    };
    let readonly = typed.readonly();
    match readonly.as_slice() {
        Ok(slice) => push(slice),
        Err(_) => {
            let owned: Vec<T> = readonly.as_array().iter().copied().collect();
            push(&owned);
        }
    }
    Ok(true)
}

/// Reads a 1-d numpy array. `Ok(false)`: a dtype without a fast path (the caller goes through
/// `tolist()`).
fn read_array_1d(
    column: &mut Column,
    array: &Bound<'_, PyUntypedArray>,
    site: &Site<'_>,
) -> Result<bool, ReadError> {
    let dtype = array.dtype();
    let (kind, size) = (dtype.kind(), dtype.itemsize());
    macro_rules! ints {
        ($t:ty) => {
            extend_from::<$t>(array, |s| column.extend_ints(s.iter().map(|&v| v as i64)))
        };
    }
    match (kind, size) {
        (b'b', 1) => extend_from::<bool>(array, |s| column.extend_bools(s.iter().copied())),
        (b'i', 1) => ints!(i8),
        (b'i', 2) => ints!(i16),
        (b'i', 4) => ints!(i32),
        (b'i', 8) => extend_from::<i64>(array, |s| column.extend_ints(s.iter().copied())),
        (b'u', 1) => ints!(u8),
        (b'u', 2) => ints!(u16),
        (b'u', 4) => ints!(u32),
        (b'u', 8) => {
            let mut overflow_at = None;
            let ok = extend_from::<u64>(array, |s| {
                overflow_at = s.iter().position(|&v| v > i64::MAX as u64);
                if overflow_at.is_none() {
                    column.extend_ints(s.iter().map(|&v| v as i64));
                }
            })?;
            match overflow_at {
                Some(position) => Err(site.overflow(position)),
                None => Ok(ok),
            }
        }
        (b'f', 4) => {
            extend_from::<f32>(array, |s| column.extend_floats(s.iter().map(|&v| v as f64)))
        }
        (b'f', 8) => extend_from::<f64>(array, |s| column.extend_floats(s.iter().copied())),
        _ => Ok(false),
    }
}

/// Turns a torch tensor into a numpy array sharing its memory (copying only off-CPU tensors).
fn tensor_as_numpy<'py>(tensor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(tensor.py());
    kwargs.set_item("force", true)?;
    tensor.call_method("numpy", (), Some(&kwargs))
}

/// Reads one row's value under a key into `column` and closes the row.
pub fn read_value(
    column: &mut Column,
    value: &Bound<'_, PyAny>,
    site: &Site<'_>,
) -> Result<(), ReadError> {
    let result = read_value_inner(column, value, site);
    if result.is_err() {
        column.abandon_row();
    }
    result
}

fn read_value_inner(
    column: &mut Column,
    value: &Bound<'_, PyAny>,
    site: &Site<'_>,
) -> Result<(), ReadError> {
    let shape = if let Ok(list) = value.cast::<PyList>() {
        read_sequence_items(column, list.iter(), site)?;
        Shape::Sequence
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        read_sequence_items(column, tuple.iter(), site)?;
        Shape::Sequence
    } else if let Ok(array) = value.cast::<PyUntypedArray>() {
        return read_array(column, array, site);
    } else if is_torch_tensor(value) {
        let converted = match tensor_as_numpy(value) {
            Ok(array) => array,
            // dtypes numpy lacks (bfloat16, ...): go through Python numbers.
            Err(_) => value.call_method0("tolist")?,
        };
        return read_value_inner(column, &converted, site);
    } else {
        match read_scalar(value, site, 0)? {
            Some(scalar) => push_scalar(column, scalar),
            None => return Err(site.not_a_number(0, value)),
        }
        Shape::Scalar
    };
    column.end_row(shape).map_err(ReadError::Fatal)
}

fn read_array(
    column: &mut Column,
    array: &Bound<'_, PyUntypedArray>,
    site: &Site<'_>,
) -> Result<(), ReadError> {
    match array.ndim() {
        0 => {
            let item = array.call_method0("item")?;
            match read_scalar(&item, site, 0)? {
                Some(scalar) => push_scalar(column, scalar),
                None => return Err(site.not_a_number(0, &item)),
            }
            column.end_row(Shape::Scalar).map_err(ReadError::Fatal)
        }
        1 => {
            if !read_array_1d(column, array, site)? {
                let list = array.call_method0("tolist")?;
                let list = list.cast_into::<PyList>().map_err(PyErr::from)?;
                read_sequence_items(column, list.iter(), site)?;
            }
            column.end_row(Shape::Sequence).map_err(ReadError::Fatal)
        }
        _ => Err(site.too_deep()),
    }
}
