//! Binding for the Arrow path. An `ArrowColumn` holds numpy views of one dataset column's Arrow
//! buffers (built once per process and kept alive by the object); `collate_arrow` gathers a
//! batch of rows from such columns and pads it, all with the interpreter released, and hands
//! the outputs out as `collate` does (`output_buffers::hand_out`: numpy or torch over the
//! Rust buffers, or copied into a provider's tensors); `collate_arrow_planned` does the same
//! for the groups and options of a `CollatePlan`, as `collate_planned` does for rows.

use std::collections::HashMap;

use numpy::{Element, PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::core::arrow::{self, ArrowColumn, Bitmap, Chunk, Offsets, Values};
use crate::core::error::CollateError;
use crate::core::pad::{Output, Plan};

use crate::py::bindings::collate::{output_converter, PyCollatePlan};
use crate::py::convert::pad_plan::{build_plan, PyPadGroup};
use crate::py::output::numpy_arrays::output_to_py;
use crate::py::output::output_buffers::{hand_out, OutputBuffers};

/// One chunk as Python describes it: (rows, offsets or None, values type, values, values length,
/// bit offset of boolean values, (validity bitmap, bit offset) or None, the same for the values).
type ChunkArgs<'py> = (
    usize,
    Option<Bound<'py, PyAny>>,
    String,
    Bound<'py, PyAny>,
    usize,
    usize,
    Option<(Bound<'py, PyAny>, usize)>,
    Option<(Bound<'py, PyAny>, usize)>,
);

/// Whether `array` is read-only and lies in memory no numpy array owns, read from the array
/// objects' C fields (not `flags`, which a subclass can answer): it does not own its data, nor
/// does any array down its chain of bases, which ends in another object that exported the
/// memory (an Arrow buffer, through the buffer protocol) and keeps it while the view holds it.
/// No numpy `resize` can move such memory (numpy resizes only arrays that own their data), so
/// it may be read with the interpreter released.
fn pinned_read_only<T: Element>(array: &Bound<'_, PyArray1<T>>) -> bool {
    use numpy::npyffi::{self, PyArrayObject, NPY_ARRAY_OWNDATA, NPY_ARRAY_WRITEABLE};
    let py = array.py();
    let mut object = array.as_array_ptr();
    // SAFETY: `object` is a live numpy array (checked by `PyArray_Check` past the first, which
    // `array` is); its `flags` and `base` fields are read while it is held (`array` holds the
    // first, each array its base) and no Python code runs.
    unsafe {
        if (*object).flags & NPY_ARRAY_WRITEABLE != 0 {
            return false;
        }
        loop {
            if (*object).flags & NPY_ARRAY_OWNDATA != 0 {
                return false;
            }
            let base = (*object).base;
            if base.is_null() {
                return false;
            }
            if npyffi::PyArray_Check(py, base) == 0 {
                return true;
            }
            object = base.cast::<PyArrayObject>();
        }
    }
}

/// Borrows a read-only, contiguous, aligned 1-D numpy array of `T` (in memory no numpy array
/// owns: `pinned_read_only`) for as long as `owners` holds it.
fn borrow<T: Element>(
    key: &str,
    what: &str,
    value: &Bound<'_, PyAny>,
    owners: &mut Vec<Py<PyAny>>,
) -> PyResult<&'static [T]> {
    let array = value.cast::<PyArray1<T>>().map_err(|_| {
        PyValueError::new_err(format!(
            "'{key}': the {what} must be a 1-D numpy array of {}",
            std::any::type_name::<T>()
        ))
    })?;
    // (An empty array is not read: `np.empty(0)` stands for a missing buffer.)
    if !array.is_c_contiguous() || (array.len() > 0 && !pinned_read_only(array)) {
        return Err(PyValueError::new_err(format!(
            "'{key}': the {what} must be a read-only contiguous view of an Arrow buffer"
        )));
    }
    let len = array.len();
    if len == 0 {
        return Ok(&[]);
    }
    let data = array.data();
    if (data as usize) % std::mem::align_of::<T>() != 0 {
        return Err(PyValueError::new_err(format!(
            "'{key}': the {what} is not aligned for {}",
            std::any::type_name::<T>()
        )));
    }
    owners.push(array.clone().into_any().unbind());
    // SAFETY: `data` points at `len` initialized, aligned elements of a contiguous array whose
    // reference is now held in `owners`, which the ArrowColumn keeps for as long as it keeps the
    // slice. The array is read-only (a view of an immutable Arrow buffer), so nothing writes to
    // it while it is read. The 'static lifetime never leaves PyArrowColumn: `column()` hands
    // it out shortened to the handle's own borrow.
    Ok(unsafe { std::slice::from_raw_parts(data, len) })
}

fn bitmap(
    key: &str,
    what: &str,
    arg: Option<(Bound<'_, PyAny>, usize)>,
    owners: &mut Vec<Py<PyAny>>,
) -> PyResult<Option<Bitmap<'static>>> {
    arg.map(|(bits, offset)| {
        Ok(Bitmap {
            bits: borrow::<u8>(key, what, &bits, owners)?,
            offset,
        })
    })
    .transpose()
}

fn chunk(key: &str, args: ChunkArgs<'_>, owners: &mut Vec<Py<PyAny>>) -> PyResult<Chunk<'static>> {
    let (rows, offsets, values_type, values, values_len, bit_offset, validity, value_validity) =
        args;
    let offsets = match offsets {
        None => None,
        Some(o) if o.cast::<PyArray1<i32>>().is_ok() => {
            Some(Offsets::I32(borrow(key, "offsets", &o, owners)?))
        }
        Some(o) => Some(Offsets::I64(borrow(key, "offsets", &o, owners)?)),
    };
    let v = &values;
    let values = match values_type.as_str() {
        "int8" => Values::I8(borrow(key, "values", v, owners)?),
        "int16" => Values::I16(borrow(key, "values", v, owners)?),
        "int32" => Values::I32(borrow(key, "values", v, owners)?),
        "int64" => Values::I64(borrow(key, "values", v, owners)?),
        "uint8" => Values::U8(borrow(key, "values", v, owners)?),
        "uint16" => Values::U16(borrow(key, "values", v, owners)?),
        "uint32" => Values::U32(borrow(key, "values", v, owners)?),
        "uint64" => Values::U64(borrow(key, "values", v, owners)?),
        "float16" => Values::F16(borrow(key, "values", v, owners)?),
        "float32" => Values::F32(borrow(key, "values", v, owners)?),
        "float64" => Values::F64(borrow(key, "values", v, owners)?),
        "bool" => Values::Bool {
            bits: Bitmap {
                bits: borrow(key, "values", v, owners)?,
                offset: bit_offset,
            },
            len: values_len,
        },
        other => {
            return Err(PyValueError::new_err(format!(
                "'{key}': unsupported values type '{other}'"
            )))
        }
    };
    if !matches!(values, Values::Bool { .. }) && values.len() != values_len {
        return Err(PyValueError::new_err(format!(
            "'{key}': {} values given, {values_len} expected",
            values.len()
        )));
    }
    let validity = bitmap(key, "validity bitmap", validity, owners)?;
    let value_validity = bitmap(key, "values' validity bitmap", value_validity, owners)?;
    Chunk::new(key, rows, offsets, values, validity, value_validity).map_err(PyErr::from)
}

/// One dataset column's Arrow chunks, borrowed from the numpy views it holds.
#[pyclass(frozen, name = "ArrowColumn", module = "fastcollate._native")]
pub struct PyArrowColumn {
    column: ArrowColumn<'static>,
    /// The arrays `column` borrows from.
    _owners: Vec<Py<PyAny>>,
}

impl PyArrowColumn {
    fn column(&self) -> &ArrowColumn<'_> {
        &self.column
    }
}

#[pymethods]
impl PyArrowColumn {
    #[new]
    fn new(key: String, chunks: Vec<ChunkArgs<'_>>) -> PyResult<Self> {
        let mut owners = Vec::new();
        let chunks = chunks
            .into_iter()
            .map(|args| chunk(&key, args, &mut owners))
            .collect::<PyResult<Vec<_>>>()?;
        let column = ArrowColumn::new(key, chunks)?;
        Ok(PyArrowColumn {
            column,
            _owners: owners,
        })
    }

    #[getter]
    fn key(&self) -> &str {
        self.column.key()
    }

    /// Rows over all chunks.
    #[getter]
    fn rows(&self) -> usize {
        self.column.rows()
    }

    fn __repr__(&self) -> String {
        format!(
            "ArrowColumn(key={:?}, rows={})",
            self.column.key(),
            self.column.rows()
        )
    }
}

/// Collates rows `indices` (dataset positions, mapped through `index_map` when given) of Arrow
/// columns: the Arrow counterpart of `collate`, with the same groups, options and output.
/// With `output_buffer`, as in `collate`, each output is written into the tensor it gives.
#[pyfunction]
#[pyo3(signature = (
    columns, index_map, indices, groups, *, float32, allow_ragged=false, dtypes=None, keys=None,
    output_buffer=None
))]
#[allow(clippy::too_many_arguments)]
pub fn collate_arrow<'py>(
    py: Python<'py>,
    columns: Vec<Bound<'py, PyArrowColumn>>,
    index_map: Option<Bound<'py, PyArrowColumn>>,
    indices: Vec<i64>,
    groups: Vec<Bound<'py, PyPadGroup>>,
    float32: bool,
    allow_ragged: bool,
    dtypes: Option<HashMap<String, String>>,
    keys: Option<Vec<String>>,
    output_buffer: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let plan = build_plan(groups, float32, allow_ragged, dtypes)?;
    let all: Vec<&ArrowColumn<'_>> = columns.iter().map(|c| c.get().column()).collect();
    let selected: Vec<&ArrowColumn<'_>> = match &keys {
        None => all,
        Some(keys) => keys
            .iter()
            .map(|key| {
                all.iter().find(|c| c.key() == key).copied().ok_or_else(|| {
                    PyErr::from(CollateError::MissingKey {
                        key: key.clone(),
                        row: 0,
                    })
                })
            })
            .collect::<PyResult<_>>()?,
    };
    let buffers = output_buffer.as_ref().and_then(OutputBuffers::new);
    let outputs = gathered_and_padded(py, &selected, index_map.as_ref(), &indices, &plan)?;
    into_dict(py, outputs, |outputs| {
        hand_out(buffers.as_ref(), outputs, |output| output_to_py(py, output))
    })
}

/// `collate_arrow` for the groups and options a `CollatePlan` holds, as `collate_planned` is
/// `collate` for them: the pad plan parsed once, each output through the plan's `to_tensor`,
/// and with its `batch_encoding` the batch finished (labels renamed, in a BatchEncoding).
/// The same output and errors as `collate_arrow` given the plan's groups and `float32`, then
/// finished as the caller would finish it.
#[pyfunction]
pub fn collate_arrow_planned<'py>(
    py: Python<'py>,
    columns: Vec<Bound<'py, PyArrowColumn>>,
    index_map: Option<Bound<'py, PyArrowColumn>>,
    indices: Vec<i64>,
    plan: &Bound<'py, PyCollatePlan>,
) -> PyResult<Bound<'py, PyAny>> {
    let plan = plan.get();
    let selected: Vec<&ArrowColumn<'_>> = columns.iter().map(|c| c.get().column()).collect();
    let outputs =
        gathered_and_padded(py, &selected, index_map.as_ref(), &indices, plan.pad_plan())?;
    let batch = into_dict(py, outputs, |outputs| {
        hand_out(None, outputs, output_converter(py, plan.to_tensor(py)))
    })?;
    plan.finished(batch)
}

/// Rows `indices` of `columns` gathered and padded by `plan`, with the interpreter released.
fn gathered_and_padded(
    py: Python<'_>,
    columns: &[&ArrowColumn<'_>],
    index_map: Option<&Bound<'_, PyArrowColumn>>,
    indices: &[i64],
    plan: &Plan,
) -> PyResult<Vec<Output>> {
    let index_map = index_map.map(|m| m.get().column());
    Ok(py.detach(|| arrow::pad_batch(columns, index_map, indices, plan))?)
}

/// The outputs, handed out by `hand`, in a dict under their keys: column order, then a
/// created attention mask (the order `collate` gives).
fn into_dict<'py>(
    py: Python<'py>,
    outputs: Vec<Output>,
    hand: impl FnOnce(Vec<Output>) -> PyResult<Vec<Bound<'py, PyAny>>>,
) -> PyResult<Bound<'py, PyDict>> {
    let keys: Vec<String> = outputs.iter().map(|output| output.key.clone()).collect();
    let values = hand(outputs)?;
    let result = PyDict::new(py);
    for (key, value) in keys.into_iter().zip(values) {
        result.set_item(key, value)?;
    }
    Ok(result)
}
