//! Reading Python row values into core columns, attached to the interpreter.
//!
//! Fast paths: lists/tuples of Python ints (their item arrays read in place by `ints`), numpy
//! arrays of any integer/float/bool dtype (strided or not), torch tensors (through
//! `Tensor.numpy(force=True)`, which shares memory on the CPU; a whole key's 1-d tensors at
//! once through one `torch.cat`), and scalars. Anything else is "not numeric", which the
//! caller may keep as a raw Python object.
//!
//! This is the hot path of every collator (`python -m fastcollate bench` times it).

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyTuple, PyType};

use crate::core::column::{Column, Shape};
use crate::core::error::CollateError;

use super::array_values::with_values;
use super::ints;
use super::tensor_concat::{concatenate_tensors, ConcatenatedRows};
use super::tensor_ints::tensor_ndim;
use super::torch::{is_torch_tensor, tensor_as_numpy, torch_tensor_type};

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
    generic: Py<PyType>,
    int64: Py<PyType>,
    integer: Py<PyType>,
    floating: Py<PyType>,
    bool_: Py<PyType>,
}

static NUMPY_SCALARS: PyOnceLock<NumpyScalarTypes> = PyOnceLock::new();

fn numpy_scalars(py: Python<'_>) -> PyResult<&NumpyScalarTypes> {
    NUMPY_SCALARS.get_or_try_init(py, || {
        let np = py.import("numpy")?;
        Ok(NumpyScalarTypes {
            generic: np.getattr("generic")?.cast_into::<PyType>()?.unbind(),
            int64: np.getattr("int64")?.cast_into::<PyType>()?.unbind(),
            integer: np.getattr("integer")?.cast_into::<PyType>()?.unbind(),
            floating: np.getattr("floating")?.cast_into::<PyType>()?.unbind(),
            bool_: np.getattr("bool_")?.cast_into::<PyType>()?.unbind(),
        })
    })
}

/// Whether a row's value is a numpy array, a numpy scalar or a torch tensor.
pub fn is_array_value(value: &Bound<'_, PyAny>) -> bool {
    if value.is_exact_instance_of::<PyInt>()
        || value.is_exact_instance_of::<PyList>()
        || value.is_exact_instance_of::<PyFloat>()
    {
        return false;
    }
    value.is_instance_of::<PyUntypedArray>()
        || numpy_scalars(value.py())
            .and_then(|np| value.is_instance(np.generic.bind(value.py())))
            .unwrap_or(false)
        || is_torch_tensor(value)
}

/// Whether a value is a numpy scalar other than an exact `np.int64` (which reads as a Python
/// int does). Beside numpy / torch token ids, tokenizer.pad hands a column of such scalars to
/// `torch.tensor` / `np.asarray`, which keep their dtype (uint8, int32, float32, float64 under
/// torch, ...) or raise (`np.bool_` beside ints under torch); the reader would make them int64,
/// float or bool.
pub fn is_numpy_scalar_of_own_dtype(value: &Bound<'_, PyAny>) -> bool {
    if value.is_exact_instance_of::<PyInt>()
        || value.is_exact_instance_of::<PyFloat>()
        || value.is_exact_instance_of::<PyBool>()
        || value.is_exact_instance_of::<PyList>()
    {
        return false;
    }
    let py = value.py();
    let Ok(np) = numpy_scalars(py) else {
        return false;
    };
    !value.get_type().is(np.int64.bind(py))
        && value.is_instance(np.generic.bind(py)).unwrap_or(false)
}

/// Whether a list or tuple holds a numpy scalar other than an exact `np.int64` (which reads as
/// a Python int does), or a 0-d array or tensor: `torch.tensor` / `np.asarray` keep such
/// values' dtype (float64, float16, int8, ...), so a key that keeps numpy scalars keeps such
/// sequences too (and the caller converts them as tokenizer.pad does). Exact Python ints and
/// floats are passed over without a look at numpy.
pub fn holds_numpy_scalar_of_own_dtype(value: &Bound<'_, PyAny>) -> bool {
    let check = |item: Bound<'_, PyAny>| {
        !(item.is_exact_instance_of::<PyInt>() || item.is_exact_instance_of::<PyFloat>())
            && (is_numpy_scalar_of_own_dtype(&item) || is_zero_d(&item).unwrap_or(false))
    };
    if let Ok(list) = value.cast_exact::<PyList>() {
        list.iter().any(check)
    } else if let Ok(tuple) = value.cast_exact::<PyTuple>() {
        tuple.iter().any(check)
    } else {
        false
    }
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
    /// An integer beyond int64: its correctly rounded f64 and whether it fits in uint64 (see
    /// `Column::push_unfit_int`).
    UnfitInt(f64, bool),
    Float(f64),
}

/// An int (a Python int or a numpy integer scalar) as a number: beyond int64, its correctly
/// rounded f64 (`float(value)`, as torch.tensor and np.asarray take it beside a float); beyond
/// f64 too, an overflow error (torch raises there too).
fn read_int(
    item: &Bound<'_, PyAny>,
    site: &Site<'_>,
    position: usize,
) -> Result<Scalar, ReadError> {
    if let Ok(v) = item.extract::<i64>() {
        return Ok(Scalar::Int(v));
    }
    let fits_u64 = item.extract::<u64>().is_ok();
    match item.extract::<f64>() {
        Ok(v) if v.is_finite() => Ok(Scalar::UnfitInt(v, fits_u64)),
        _ => Err(site.overflow(position)),
    }
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
        return read_int(item, site, position).map(Some);
    }
    if let Ok(f) = item.cast::<PyFloat>() {
        return Ok(Some(Scalar::Float(f.value())));
    }
    let py = item.py();
    let np = numpy_scalars(py)?;
    if item.is_instance(np.integer.bind(py))? {
        return read_int(item, site, position).map(Some);
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
        Scalar::UnfitInt(v, fits_u64) => column.push_unfit_int(v, fits_u64),
        Scalar::Float(v) => column.push_float(v),
    }
}

/// A number read as a Python value (an item of a list or tuple, or a row's scalar): a float
/// is noted in the column (see `Column::first_python_float_row`).
fn push_python_scalar(column: &mut Column, scalar: Scalar) {
    let float = matches!(scalar, Scalar::Float(_));
    push_scalar(column, scalar);
    if float {
        column.mark_python_floats();
    }
}

/// Reads a list or tuple: the leading run of exact Python ints (all of a row of token ids or a
/// mask) straight from the item array, the rest item by item.
fn read_sequence(
    column: &mut Column,
    sequence: &Bound<'_, PyAny>,
    is_list: bool,
    site: &Site<'_>,
) -> Result<(), ReadError> {
    let start = ints::read_exact_ints(column, sequence, is_list);
    if is_list {
        let list = sequence.cast::<PyList>().map_err(PyErr::from)?;
        if start < list.len() {
            read_sequence_items(column, list.iter().skip(start), start, site)?;
        }
    } else {
        let tuple = sequence.cast::<PyTuple>().map_err(PyErr::from)?;
        if start < tuple.len() {
            read_sequence_items(column, tuple.iter().skip(start), start, site)?;
        }
    }
    Ok(())
}

/// Reads items one by one; `first_position` is the first item's index in its row.
fn read_sequence_items<'py>(
    column: &mut Column,
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    first_position: usize,
    site: &Site<'_>,
) -> Result<(), ReadError> {
    for (index, item) in items.enumerate() {
        let position = first_position + index;
        // Exact ints first: by far the most common element (token ids).
        if let Ok(int) = item.cast_exact::<PyInt>() {
            match int.extract::<i64>() {
                Ok(v) => column.push_int(v),
                Err(_) => push_scalar(column, read_int(&item, site, position)?),
            }
            continue;
        }
        match read_scalar(&item, site, position)? {
            Some(scalar) => push_python_scalar(column, scalar),
            // A 0-d array or tensor (`list(torch.tensor(ids))`): its number, as tokenizer.pad
            // reads it (`to_py_obj`, a Python number).
            None if is_zero_d(&item)? => {
                let number = zero_d_number(&item)?;
                match read_scalar(&number, site, position)? {
                    Some(scalar) => push_python_scalar(column, scalar),
                    None => return Err(site.not_a_number(position, &number)),
                }
            }
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

/// Whether a value is a 0-d numpy array (its `ndim` read at the C level) or a 0-d torch tensor
/// (its rank read through `TensorBase`'s own descriptor, `tensor_ints::tensor_ndim`, else
/// `dim()`; torch function modes are off while rows are read: see `torch::modes_off`).
fn is_zero_d(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    if let Ok(array) = value.cast::<PyUntypedArray>() {
        return Ok(array.ndim() == 0);
    }
    if is_torch_tensor(value) {
        if let Some(ndim) = tensor_ndim(value) {
            return Ok(ndim == 0);
        }
        let py = value.py();
        return Ok(value.call_method0(intern!(py, "dim"))?.extract::<usize>()? == 0);
    }
    Ok(false)
}

/// A 0-d numpy array's or torch tensor's number: `item()`, the Python number in one call (int
/// for integer dtypes, float, bool), as `tolist()` gives it. The one read of a 0-d value, as a
/// row's value and as an item of a list or tuple.
fn zero_d_number<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    value.call_method0(intern!(value.py(), "item"))
}

/// A numpy element type, and how its values go into a column.
trait ColumnElement: numpy::Element + Copy {
    fn push(column: &mut Column, values: &[Self]);
}

macro_rules! int_elements {
    ($($t:ty),*) => {$(
        impl ColumnElement for $t {
            fn push(column: &mut Column, values: &[Self]) {
                column.extend_ints(values.iter().map(|&v| i64::from(v)));
            }
        }
    )*};
}
int_elements!(i8, i16, i32, i64, u8, u16, u32);

impl ColumnElement for bool {
    fn push(column: &mut Column, values: &[Self]) {
        column.extend_bools(values.iter().copied());
    }
}

impl ColumnElement for f32 {
    fn push(column: &mut Column, values: &[Self]) {
        column.extend_floats(values.iter().map(|&v| f64::from(v)));
    }
}

impl ColumnElement for f64 {
    fn push(column: &mut Column, values: &[Self]) {
        column.extend_floats(values.iter().copied());
    }
}

/// Rows laid end to end in one array: each row's length, and the shape the rows close with
/// (one value per row for `Shape::Scalar`).
pub struct RowSplit<'a> {
    lengths: &'a [usize],
    shape: Shape,
}

/// Pushes a 1-d array of `T`: all of it into the current row (`rows: None`), or split into rows
/// (whose lengths must add up to its length), each closed here.
fn extend_rows<T: ColumnElement>(
    column: &mut Column,
    array: &Bound<'_, PyUntypedArray>,
    rows: Option<&RowSplit<'_>>,
) -> Result<bool, ReadError> {
    let done = with_values::<T, _>(array, |values| -> Result<(), CollateError> {
        let Some(split) = rows else {
            T::push(column, values);
            return Ok(());
        };
        let mut rest = values;
        for &length in split.lengths {
            let (row, tail) = rest.split_at_checked(length).ok_or_else(|| {
                CollateError::InvalidOption(format!(
                    "'{}': tensor lengths do not add up to the concatenated length",
                    column.key
                ))
            })?;
            T::push(column, row);
            column.end_row(split.shape)?;
            rest = tail;
        }
        Ok(())
    });
    match done {
        None => Ok(false),
        Some(Ok(())) => Ok(true),
        Some(Err(err)) => Err(ReadError::Fatal(err)),
    }
}

/// Reads a 1-d numpy array into the current row. `Ok(false)`: a dtype without a fast path (the
/// caller goes through `tolist()`); nothing was read.
fn read_array_1d(
    column: &mut Column,
    array: &Bound<'_, PyUntypedArray>,
) -> Result<bool, ReadError> {
    if array.dtype().kind() == b'u' && array.dtype().itemsize() == 8 {
        let read = with_values::<u64, _>(array, |values| {
            if values.iter().all(|&v| i64::try_from(v).is_ok()) {
                column.extend_ints(values.iter().map(|&v| v as i64));
                return;
            }
            // Past int64: each such value kept as its rounded f64 (see `push_unfit_int`).
            for &v in values {
                match i64::try_from(v) {
                    Ok(v) => column.push_int(v),
                    Err(_) => column.push_unfit_int(v as f64, true),
                }
            }
        });
        return Ok(read.is_some());
    }
    read_flat_array(column, array, None)
}

/// Reads a 1-d array of any dtype with a fast path but uint64 (whose values past int64 are
/// pushed one by one): into the current row, or split into rows (see `extend_rows`).
fn read_flat_array(
    column: &mut Column,
    array: &Bound<'_, PyUntypedArray>,
    rows: Option<&RowSplit<'_>>,
) -> Result<bool, ReadError> {
    let dtype = array.dtype();
    match (dtype.kind(), dtype.itemsize()) {
        (b'b', 1) => extend_rows::<bool>(column, array, rows),
        (b'i', 1) => extend_rows::<i8>(column, array, rows),
        (b'i', 2) => extend_rows::<i16>(column, array, rows),
        (b'i', 4) => extend_rows::<i32>(column, array, rows),
        (b'i', 8) => extend_rows::<i64>(column, array, rows),
        (b'u', 1) => extend_rows::<u8>(column, array, rows),
        (b'u', 2) => extend_rows::<u16>(column, array, rows),
        (b'u', 4) => extend_rows::<u32>(column, array, rows),
        (b'f', 4) => extend_rows::<f32>(column, array, rows),
        (b'f', 8) => extend_rows::<f64>(column, array, rows),
        _ => Ok(false),
    }
}

/// Reads one key's values, one 1-d `torch.Tensor` per row, into a fresh column through a single
/// `torch.cat` (see `tensor_concat::concatenate_tensors`): one call into torch for the batch
/// instead of one or two per row (and one copy off the device). This is the general path's
/// read of a tensor key; pad groups of the usual kind read each integer tensor in place
/// instead (the reader's strict route, `collate_rows`, through `tensor_ints`).
/// `Ok(false)`: the batch is not of that shape (other types, mixed float dtypes or devices, a
/// dtype without a fast path, ...) and nothing was read; the caller reads row by row, which
/// also reports any error with its row.
pub fn read_tensor_rows(column: &mut Column, tensors: &[Bound<'_, PyAny>]) -> PyResult<bool> {
    let Some(ConcatenatedRows { array, lengths, .. }) =
        concatenate_tensors(&[tensors]).and_then(|mut keys| keys.pop())
    else {
        return Ok(false);
    };
    if column.rows() == 0 && array.dtype().kind() != b'f' {
        column.ints.reserve(array.len());
    }
    let split = RowSplit {
        lengths: &lengths,
        shape: Shape::Sequence,
    };
    match read_flat_array(column, &array, Some(&split)) {
        Ok(read) => Ok(read),
        // Rows are closed one by one and cannot fail on a fresh column; if one did, the rows
        // before it must not be read again.
        Err(_) if column.rows() == 0 => {
            column.abandon_row();
            Ok(false)
        }
        Err(ReadError::Python(err)) => Err(err),
        Err(ReadError::Fatal(err) | ReadError::NotNumeric(err)) => Err(err.into()),
    }
}

/// Reads one key's values, one 0-d `torch.Tensor` per row (the labels `set_format("torch")`
/// gives), into a fresh column. Each row takes one `tolist()`, which gives a 0-d tensor's
/// number as `item()` does (int for integer dtypes, float, bool) and anything else as a list,
/// so it also tells a 0-d tensor from a one-element tensor, which `item()` takes too, in one
/// call where `dim()` and `item()` are two (and a `torch.stack` costs more). Row 0 is checked
/// with `dim()` first, so a key of large tensors is not turned into lists.
/// `false`: some value is not an exact 0-d tensor whose number is in range, or the column is
/// not fresh, and nothing was read (the caller reads row by row and reports it). Closing
/// scalar rows in a fresh column cannot fail; were it to, the error comes back.
pub fn read_tensor_scalars(
    column: &mut Column,
    tensors: &[Bound<'_, PyAny>],
) -> Result<bool, CollateError> {
    let Some(first) = tensors.first().filter(|_| column.rows() == 0) else {
        return Ok(false);
    };
    let py = first.py();
    let Some(tensor_type) = torch_tensor_type(py) else {
        return Ok(false);
    };
    let first_dim = first
        .call_method0(intern!(py, "dim"))
        .and_then(|dim| dim.extract::<usize>());
    if !matches!(first_dim, Ok(0)) {
        return Ok(false);
    }
    let site = Site {
        key: &column.key,
        row: 0,
    };
    let mut scalars = Vec::with_capacity(tensors.len());
    for tensor in tensors {
        if !tensor.get_type().is(tensor_type) {
            return Ok(false);
        }
        let Ok(number) = tensor.call_method0(intern!(py, "tolist")) else {
            return Ok(false);
        };
        match read_scalar(&number, &site, 0) {
            Ok(Some(scalar)) => scalars.push(scalar),
            _ => return Ok(false),
        }
    }
    for scalar in scalars {
        push_scalar(column, scalar);
        column.end_row(Shape::Scalar)?;
    }
    Ok(true)
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
    let shape = if value.is_instance_of::<PyList>() {
        read_sequence(column, value, true, site)?;
        Shape::Sequence
    } else if value.is_instance_of::<PyTuple>() {
        read_sequence(column, value, false, site)?;
        Shape::Sequence
    } else if let Ok(array) = value.cast::<PyUntypedArray>() {
        return read_array(column, array, site);
    } else if is_torch_tensor(value) {
        if is_zero_d(value)? {
            return read_scalar_row(column, &zero_d_number(value)?, site);
        }
        let converted = match tensor_as_numpy(value) {
            Ok(array) => array,
            // dtypes numpy lacks (bfloat16, ...): go through Python numbers.
            Err(_) => value.call_method0("tolist")?,
        };
        // A tensor's floats are a float tensor's, even when read through Python numbers.
        let python_floats = column.first_python_float_row;
        let read = read_value_inner(column, &converted, site);
        column.first_python_float_row = python_floats;
        return read;
    } else {
        match read_scalar(value, site, 0)? {
            Some(scalar) => push_python_scalar(column, scalar),
            None => return Err(site.not_a_number(0, value)),
        }
        Shape::Scalar
    };
    column.end_row(shape).map_err(ReadError::Fatal)
}

/// Reads a number (a 0-d array's or tensor's `item()`) as the row's value and closes the row.
fn read_scalar_row(
    column: &mut Column,
    item: &Bound<'_, PyAny>,
    site: &Site<'_>,
) -> Result<(), ReadError> {
    match read_scalar(item, site, 0)? {
        Some(scalar) => push_scalar(column, scalar),
        None => return Err(site.not_a_number(0, item)),
    }
    column.end_row(Shape::Scalar).map_err(ReadError::Fatal)
}

fn read_array(
    column: &mut Column,
    array: &Bound<'_, PyUntypedArray>,
    site: &Site<'_>,
) -> Result<(), ReadError> {
    match array.ndim() {
        0 => read_scalar_row(column, &zero_d_number(array)?, site),
        1 => {
            if !read_array_1d(column, array)? {
                let list = array.call_method0("tolist")?;
                let list = list.cast_into::<PyList>().map_err(PyErr::from)?;
                read_sequence(column, &list, true, site)?;
            }
            column.end_row(Shape::Sequence).map_err(ReadError::Fatal)
        }
        _ => Err(site.too_deep()),
    }
}
