//! Binding for `fastcollate.trl.pad_with_mask` (TRL's `pad` of tensors goes through `collate`):
//! a list of lists or tuples of ints padded into an int64 matrix with its attention mask, in one call.
//! The reader's strict route writes exact lists and tuples of exact ints straight into the
//! padded matrix, without a dict per row or a column in between; any other batch takes its lax
//! route (the rows gathered into a column and padded by the core), which pads it the same way
//! or names the bad row.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::core::pad::{self, Data, Layout, PadGroup, Plan, Strategy};
use crate::py::convert::reader::{Reader, Values};
use crate::py::output::numpy_arrays::{matrix, output_to_py};

/// The key the sequences are read under (and errors name).
const KEY: &str = "sequences";
/// The attention mask's key in the lax route (no row can hold it).
const MASK: &str = "\0mask";

type Padded<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>);

/// `(input_ids, attention_mask)`: `sequences` (a list or tuple of lists or tuples of ints)
/// padded with `pad_id` to the longest, rounded up to `multiple`, on the left when `left`, as
/// int64 matrices. A sequence that is not a list or tuple, or holds something other than
/// integers, is an error naming its row (key "sequences").
#[pyfunction]
#[pyo3(signature = (sequences, *, pad_id, multiple, left))]
pub fn pad_sequences<'py>(
    py: Python<'py>,
    sequences: &Bound<'py, PyAny>,
    pad_id: i64,
    multiple: Option<usize>,
    left: bool,
) -> PyResult<Padded<'py>> {
    let items: Vec<Bound<'py, PyAny>> = if let Ok(list) = sequences.cast_exact::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = sequences.cast_exact::<PyTuple>() {
        tuple.iter().collect()
    } else {
        sequences.try_iter()?.collect::<PyResult<_>>()?
    };
    let values = Values::of(items);
    if let Some(padded) = strict(py, &values, pad_id, multiple, left)? {
        return Ok(padded);
    }
    lax(py, values, pad_id, multiple, left)
}

/// The strict route; None when a sequence is not an exact list or tuple of exact ints in the
/// int64 range (or every one is empty). Nothing here runs Python code.
fn strict<'py>(
    py: Python<'py>,
    values: &Values<'py>,
    pad_id: i64,
    multiple: Option<usize>,
    left: bool,
) -> PyResult<Option<Padded<'py>>> {
    let Some(lengths) = values.token_lengths() else {
        return Ok(None);
    };
    let longest = lengths.iter().copied().max().unwrap_or(0);
    if longest == 0 {
        return Ok(None);
    }
    let target = pad::round_up(longest, multiple)?;
    let Some(ids) = values.padded(KEY, &lengths, target, pad_id, left)? else {
        return Ok(None);
    };
    let mask = pad::attention_mask(KEY, &lengths, target, left)?;
    let rows = lengths.len();
    Ok(Some((
        matrix(py, rows, target, ids)?,
        matrix(py, rows, target, mask)?,
    )))
}

/// The lax route: every sequence a list or tuple (subclasses too), read into a column by the
/// reader's lax route and padded by the core, as `collate` pads a group.
fn lax<'py>(
    py: Python<'py>,
    values: Values<'py>,
    pad_id: i64,
    multiple: Option<usize>,
    left: bool,
) -> PyResult<Padded<'py>> {
    if let Some((row, value)) = values.first_not_a_sequence() {
        return Err(PyTypeError::new_err(format!(
            "'{KEY}' in row {row} is a {}; pad_with_mask takes lists of token ids (pad takes \
             tensors)",
            value.get_type().name()?
        )));
    }
    let rows = PyList::empty(py);
    for value in values.objects() {
        let dict = PyDict::new(py);
        dict.set_item(KEY, value)?;
        rows.append(dict)?;
    }
    let plan = Plan {
        groups: vec![PadGroup {
            lead: KEY.to_owned(),
            lead_pad_value: pad_id,
            strategy: Strategy::Longest,
            pad_to_multiple_of: multiple,
            left,
            followers: Vec::new(),
            attention_mask: Some(MASK.to_owned()),
            integer_lead: false,
        }],
        float_dtype: pad::DType::F64,
        allow_ragged: false,
        dtypes: Default::default(),
    };
    let columns = Reader::new(rows.as_any()).lax(&[KEY.to_owned()])?;
    let mut outputs = py.detach(|| pad::collate(columns, &plan))?;
    let mut take = |key: &str| {
        outputs
            .iter()
            .position(|output| output.key == key)
            .map(|at| outputs.swap_remove(at))
            .ok_or_else(|| PyTypeError::new_err(format!("'{KEY}' gave no padded output")))
    };
    let ids = take(KEY)?;
    let mask = take(MASK)?;
    let integers = matches!(ids.data, Data::I64(_)) && matches!(ids.layout, Layout::Matrix { .. });
    if !integers {
        let dtype = match ids.data {
            Data::Bool(_) => "bool",
            Data::I64(_) => "int64",
            Data::F32(_) => "float32",
            Data::F64(_) => "float64",
        };
        return Err(PyTypeError::new_err(format!(
            "'{KEY}' in row 0 holds {dtype} values; it must hold integers"
        )));
    }
    Ok((output_to_py(py, ids)?, output_to_py(py, mask)?))
}
