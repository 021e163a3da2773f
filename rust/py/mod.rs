//! The binding layer: walks Python rows once (attached), hands plain columns to the core with
//! the interpreter released, and gives the core's buffers to numpy without copying them. Pad
//! groups of the usual kind skip the columns: `in_place` writes their rows straight into the
//! core's padded buffers.

mod arrow;
mod error;
mod flatten;
mod grouping;
mod in_place;
mod masking;
mod read;
mod sampling;
mod tensors;

use std::collections::HashMap;

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::{PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::core::column::Column;
use crate::core::error::CollateError;
use crate::core::pad::{self, DType, Data, Follower, Layout, Output, PadGroup, Plan, Strategy};
use read::{ReadError, Site};

/// A pad group as Python passes it: (lead, lead_pad_value, strategy, max_length,
/// pad_to_multiple_of, left, [(follower, pad_value, same_length_as_lead)], attention_mask_key).
type GroupArgs = (
    String,
    i64,
    String,
    Option<usize>,
    Option<usize>,
    bool,
    Vec<(String, i64, bool)>,
    Option<String>,
);

fn parse_group(args: GroupArgs) -> Result<PadGroup, CollateError> {
    let (lead, lead_pad_value, strategy, max_length, pad_to_multiple_of, left, followers, mask) =
        args;
    pad::round_up(0, pad_to_multiple_of)?;
    Ok(PadGroup {
        lead,
        lead_pad_value,
        strategy: Strategy::parse(&strategy, max_length)?,
        pad_to_multiple_of,
        left,
        followers: followers
            .into_iter()
            .map(|(key, pad_value, same_length_as_lead)| Follower {
                key,
                pad_value,
                same_length_as_lead,
            })
            .collect(),
        attention_mask: mask,
    })
}

fn parse_dtype(name: &str) -> Result<DType, CollateError> {
    match name {
        "bool" => Ok(DType::Bool),
        "int64" => Ok(DType::I64),
        "float32" => Ok(DType::F32),
        "float64" => Ok(DType::F64),
        other => Err(CollateError::InvalidOption(format!(
            "unsupported output dtype '{other}'"
        ))),
    }
}

/// One key's values across the batch: numbers in `column`, unless some value was not numeric,
/// in which case the raw Python objects are handed back as a list (`raw` is kept only for keys
/// that may end up raw: padded keys are numbers or an error).
struct Gathered<'py> {
    column: Column,
    raw: Vec<Bound<'py, PyAny>>,
    is_raw: bool,
    padded: bool,
    /// Handed back raw as soon as a value is a numpy or torch value (see `collate`).
    keep_arrays: bool,
}

fn key_string(key: &Bound<'_, PyAny>) -> PyResult<String> {
    key.cast::<PyString>()
        .map_err(|_| PyTypeError::new_err("feature names must be strings"))?
        .to_str()
        .map(str::to_owned)
}

/// The keys a batch is collated under: each one's name, and the Python string rows are looked
/// up with and the output is keyed by. Read from the first row, that string is the row's own
/// key object, as in transformers (which also keeps a str subclass there): a dict lookup with
/// the very object the dict holds skips comparing the strings, and rows built alike (a
/// dataset's) share their key objects.
#[derive(Clone)]
struct BatchKeys<'py> {
    names: Vec<String>,
    objects: Vec<Bound<'py, PyString>>,
}

impl<'py> BatchKeys<'py> {
    fn named(py: Python<'py>, names: Vec<String>) -> Self {
        let objects = names.iter().map(|name| PyString::new(py, name)).collect();
        BatchKeys { names, objects }
    }

    /// The keys of `row` (a mapping), in its order.
    fn of_row(row: &Bound<'py, PyAny>) -> PyResult<Self> {
        let keys = match row.cast_exact::<PyDict>() {
            Ok(dict) => dict.keys().into_any(),
            Err(_) => row.call_method0("keys")?,
        };
        let mut names = Vec::new();
        let mut objects = Vec::new();
        for key in keys.try_iter()? {
            let key = key?;
            names.push(key_string(&key)?);
            objects.push(key.cast_into::<PyString>()?);
        }
        Ok(BatchKeys { names, objects })
    }

    /// The keys `keep` accepts, in order.
    fn filtered(&self, keep: impl Fn(&str) -> bool) -> Self {
        let (names, objects) = self
            .names
            .iter()
            .zip(&self.objects)
            .filter(|(name, _)| keep(name))
            .map(|(name, object)| (name.clone(), object.clone()))
            .unzip();
        BatchKeys { names, objects }
    }
}

/// `key` is `name` as a Python string (see `BatchKeys`): a lookup then costs no string
/// allocation and no hashing. Exact dicts are read directly; every other mapping (dict
/// subclasses included, which may compute or transform values) through `row[key]`.
fn row_value<'py>(
    row: &Bound<'py, PyAny>,
    key: &Bound<'py, PyString>,
    name: &str,
    index: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let missing = || {
        PyErr::from(CollateError::MissingKey {
            key: name.into(),
            row: index,
        })
    };
    if let Ok(dict) = row.cast_exact::<PyDict>() {
        return dict.get_item(key)?.ok_or_else(missing);
    }
    if !row.hasattr("keys").unwrap_or(false) {
        return Err(CollateError::NotAMapping {
            row: index,
            type_name: row
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default(),
        }
        .into());
    }
    row.get_item(key).map_err(|err| {
        if err.is_instance_of::<pyo3::exceptions::PyKeyError>(row.py()) {
            missing()
        } else {
            err
        }
    })
}

/// An exception raised while reading a value (a tensor numpy cannot take, a failing
/// `tolist()`, ...) as a TypeError naming the key and row; TypeErrors, ValueErrors and
/// anything that is not an `Exception` (KeyboardInterrupt) or a MemoryError pass unchanged.
fn unreadable(err: PyErr, py: Python<'_>, key: &str, row: usize) -> PyErr {
    use pyo3::exceptions::PyException;
    let passes = err.is_instance_of::<PyTypeError>(py)
        || err.is_instance_of::<PyValueError>(py)
        || err.is_instance_of::<PyMemoryError>(py)
        || !err.is_instance_of::<PyException>(py);
    if passes {
        return err;
    }
    let wrapped = PyTypeError::new_err(format!(
        "'{key}' in row {row} could not be read as numbers: {err}"
    ));
    wrapped.set_cause(py, Some(err));
    wrapped
}

fn add_value<'py>(
    gathered: &mut Gathered<'py>,
    value: Bound<'py, PyAny>,
    key: &str,
    row: usize,
) -> PyResult<()> {
    if gathered.keep_arrays && !gathered.is_raw && read::is_array_value(&value) {
        gathered.is_raw = true;
    }
    if !gathered.is_raw {
        match read::read_value(&mut gathered.column, &value, &Site { key, row }) {
            Ok(()) => {}
            Err(ReadError::NotNumeric(err)) if gathered.padded => return Err(err.into()),
            Err(ReadError::NotNumeric(_)) => gathered.is_raw = true,
            Err(ReadError::Fatal(err)) => return Err(err.into()),
            Err(ReadError::Python(err)) => return Err(unreadable(err, value.py(), key, row)),
        }
    }
    if !gathered.padded {
        gathered.raw.push(value);
    }
    Ok(())
}

/// Most values a column reserves room for up front (8 MiB of int64); past that it grows.
const MAX_RESERVED_VALUES: usize = 1 << 20;

/// Reserves room for a batch of rows about as long as the first: growing a column from empty
/// copied it a dozen times per batch.
fn reserve_like_first_row(column: &mut Column, first_value: &Bound<'_, PyAny>, rows: usize) {
    let length = if let Ok(list) = first_value.cast::<PyList>() {
        list.len()
    } else if let Ok(tuple) = first_value.cast::<PyTuple>() {
        tuple.len()
    } else if let Ok(array) = first_value.cast::<numpy::PyUntypedArray>() {
        numpy::PyUntypedArrayMethods::len(array)
    } else {
        return;
    };
    let values = length.saturating_mul(rows).min(MAX_RESERVED_VALUES);
    if column.rows() == 0 {
        column.ints.reserve(values);
    }
}

/// Reads a whole key at once when its values are torch tensors: 1-d ones through one
/// `torch.cat` (`read::read_tensor_rows`), 0-d ones (labels) one `tolist()` each
/// (`read::read_tensor_scalars`). `false`: nothing was read; read the values one by one.
fn add_tensor_values(gathered: &mut Gathered<'_>, values: &[Bound<'_, PyAny>]) -> PyResult<bool> {
    if !values.first().is_some_and(tensors::is_torch_tensor) {
        return Ok(false);
    }
    Ok(read::read_tensor_rows(&mut gathered.column, values)?
        || read::read_tensor_scalars(&mut gathered.column, values)?)
}

/// Walks the batch once: a list/tuple of mappings (rows), or a mapping of key -> rows.
fn gather<'py>(
    features: &Bound<'py, PyAny>,
    padded_keys: &[&str],
    only_keys: Option<BatchKeys<'py>>,
    keep_arrays: bool,
) -> PyResult<(BatchKeys<'py>, Vec<Gathered<'py>>)> {
    let new_gathered = |key: &str, rows: usize| {
        let padded = padded_keys.contains(&key);
        Gathered {
            column: Column::with_capacity(key, rows, 0),
            raw: Vec::with_capacity(if padded { 0 } else { rows }),
            is_raw: false,
            padded,
            keep_arrays: keep_arrays && !padded,
        }
    };
    let rows: Vec<Bound<'py, PyAny>> = if let Ok(list) = features.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = features.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        // Columnar input: a mapping of key -> sequence of rows (already a dict of lists).
        let mapping = features;
        let mut keys = BatchKeys {
            names: Vec::new(),
            objects: Vec::new(),
        };
        let mut columns = Vec::new();
        let mut batch_size = None;
        for key in mapping.call_method0("keys")?.try_iter()? {
            let key = key?;
            let name = key_string(&key)?;
            let values: Vec<Bound<'py, PyAny>> = mapping
                .get_item(&key)?
                .try_iter()?
                .collect::<PyResult<_>>()?;
            match batch_size {
                None => batch_size = Some(values.len()),
                Some(n) if n != values.len() => {
                    return Err(PyValueError::new_err(format!(
                        "'{name}' holds {} rows but the keys before it hold {n}; every key of a \
                         batch needs one value per row",
                        values.len()
                    )))
                }
                Some(_) => {}
            }
            let mut gathered = new_gathered(&name, values.len());
            if let Some(first) = values.first() {
                reserve_like_first_row(&mut gathered.column, first, values.len());
            }
            if !add_tensor_values(&mut gathered, &values)? {
                for (row, value) in values.into_iter().enumerate() {
                    add_value(&mut gathered, value, &name, row)?;
                }
            }
            keys.names.push(name);
            keys.objects.push(key.cast_into::<PyString>()?);
            columns.push(gathered);
        }
        return Ok((keys, columns));
    };
    let Some(first) = rows.first() else {
        return Err(CollateError::EmptyBatch.into());
    };
    if !first.hasattr("keys")? {
        return Err(CollateError::NotAMapping {
            row: 0,
            type_name: first.get_type().name()?.to_string(),
        }
        .into());
    }
    let keys = match only_keys {
        Some(keys) => keys,
        None => BatchKeys::of_row(first)?,
    };
    let py_keys = &keys.objects;
    let mut columns: Vec<Gathered<'py>> = keys
        .names
        .iter()
        .map(|k| new_gathered(k, rows.len()))
        .collect();
    // Keys whose values are torch tensors in every row (all dicts) are read first, one call into
    // torch each. Such a key has no error to report, so errors still come in row order.
    let mut read_already = vec![false; keys.names.len()];
    for ((key, gathered), done) in py_keys.iter().zip(&mut columns).zip(&mut read_already) {
        let first_is_tensor = first
            .cast_exact::<PyDict>()
            .ok()
            .and_then(|dict| dict.get_item(key).ok().flatten())
            .is_some_and(|value| tensors::is_torch_tensor(&value));
        if first_is_tensor && !gathered.keep_arrays {
            let values: Option<Vec<Bound<'py, PyAny>>> = rows
                .iter()
                .map(|row| {
                    row.cast_exact::<PyDict>()
                        .ok()?
                        .get_item(key)
                        .ok()
                        .flatten()
                })
                .collect();
            if let Some(values) = values {
                *done = add_tensor_values(gathered, &values)?;
            }
        }
    }
    for (index, row) in rows.iter().enumerate() {
        for (((name, key), gathered), &done) in keys
            .names
            .iter()
            .zip(py_keys)
            .zip(columns.iter_mut())
            .zip(&read_already)
        {
            if done {
                continue;
            }
            let value = row_value(row, key, name, index)?;
            if index == 0 {
                reserve_like_first_row(&mut gathered.column, &value, rows.len());
            }
            add_value(gathered, value, name, index)?;
        }
    }
    Ok((keys, columns))
}

fn ragged_list<'py, T>(
    py: Python<'py>,
    values: &[T],
    offsets: &[usize],
) -> PyResult<Bound<'py, PyAny>>
where
    T: Copy + for<'a> IntoPyObject<'a>,
{
    let rows = offsets
        .windows(2)
        .map(|w| PyList::new(py, values[w[0]..w[1]].iter().copied()))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, rows)?.into_any())
}

fn array<'py, T>(py: Python<'py>, values: Vec<T>, layout: &Layout) -> PyResult<Bound<'py, PyAny>>
where
    T: numpy::Element + Copy + for<'a> IntoPyObject<'a>,
{
    // Both arms move the Vec into numpy: the array owns the Rust buffer, nothing is copied.
    match layout {
        Layout::Scalar { .. } => Ok(PyArray1::from_vec(py, values).into_any()),
        Layout::Matrix { rows, columns } => Ok(Array2::from_shape_vec((*rows, *columns), values)
            .map_err(|e| PyValueError::new_err(e.to_string()))?
            .into_pyarray(py)
            .into_any()),
        Layout::Ragged { offsets } => ragged_list(py, &values, offsets),
    }
}

fn output_to_py<'py>(py: Python<'py>, output: Output) -> PyResult<Bound<'py, PyAny>> {
    match output.data {
        Data::Bool(v) => array(py, v, &output.layout),
        Data::I64(v) => array(py, v, &output.layout),
        Data::F32(v) => array(py, v, &output.layout),
        Data::F64(v) => array(py, v, &output.layout),
    }
}

/// The core's plan from the arguments both `collate` and `collate_arrow` take.
pub(crate) fn build_plan(
    groups: Vec<GroupArgs>,
    float32: bool,
    allow_ragged: bool,
    dtypes: Option<HashMap<String, String>>,
) -> PyResult<Plan> {
    let groups = groups
        .into_iter()
        .map(parse_group)
        .collect::<Result<Vec<_>, _>>()?;
    let dtypes = dtypes
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| parse_dtype(&v).map(|d| (k, d)))
        .collect::<Result<HashMap<_, _>, _>>()?;
    Ok(Plan {
        groups,
        float_dtype: if float32 { DType::F32 } else { DType::F64 },
        allow_ragged,
        dtypes,
    })
}

/// What `pad_groups_in_place` did: the keys being collated, the outputs of the groups it
/// padded, and the groups left for the core.
struct InPlace<'py> {
    keys: BatchKeys<'py>,
    outputs: Vec<Output>,
    rest_groups: Vec<PadGroup>,
}

/// Pads the groups it can straight from the rows (see `in_place`), for a list or tuple of
/// exact dicts. `None`: nothing was padded in place (other rows, or no group qualified), and
/// the whole batch goes the general way.
fn pad_groups_in_place<'py>(
    features: &Bound<'py, PyAny>,
    plan: &Plan,
    padded_keys: &[&str],
    only_keys: &Option<BatchKeys<'py>>,
) -> PyResult<Option<InPlace<'py>>> {
    let items: Vec<Bound<'py, PyAny>> = if let Ok(list) = features.cast_exact::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = features.cast_exact::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Ok(None);
    };
    let Some(rows) = items
        .into_iter()
        .map(|row| row.cast_into_exact::<PyDict>().ok())
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    // A key in two groups is left to the core, which decides between them.
    if padded_keys
        .iter()
        .enumerate()
        .any(|(i, key)| padded_keys[..i].contains(key))
    {
        return Ok(None);
    }
    let keys = match only_keys {
        Some(keys) => keys.clone(),
        None => match BatchKeys::of_row(first.as_any()) {
            Ok(keys) => keys,
            Err(_) => return Ok(None), // the general path raises it
        },
    };
    let mut outputs = Vec::new();
    let mut rest_groups = Vec::new();
    for group in &plan.groups {
        match in_place::pad_group(&rows, &keys.names, &keys.objects, group, plan) {
            Some(group_outputs) => outputs.extend(group_outputs),
            None => rest_groups.push(group.clone()),
        }
    }
    if outputs.is_empty() {
        return Ok(None);
    }
    Ok(Some(InPlace {
        keys,
        outputs,
        rest_groups,
    }))
}

/// Collates a batch: gathers every key of the first row (attached), pads the groups and stacks
/// the rest (detached), and returns an ordered dict of numpy arrays. Keys whose values are not
/// numbers come back as lists of the original objects, for the caller to handle; with
/// `keep_arrays`, so do keys outside the pad groups holding a numpy or torch value (which
/// tokenizer.pad leaves to BatchEncoding when the main input is Python lists).
#[pyfunction]
#[pyo3(signature = (
    features, groups, *, float32, allow_ragged=false, dtypes=None, keys=None, keep_arrays=false
))]
#[allow(clippy::too_many_arguments)]
fn collate<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    groups: Vec<GroupArgs>,
    float32: bool,
    allow_ragged: bool,
    dtypes: Option<HashMap<String, String>>,
    keys: Option<Vec<String>>,
    keep_arrays: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let plan = build_plan(groups, float32, allow_ragged, dtypes)?;
    let keys = keys.map(|names| BatchKeys::named(py, names));
    let mut padded_keys: Vec<&str> = Vec::new();
    for group in &plan.groups {
        padded_keys.push(&group.lead);
        padded_keys.extend(group.followers.iter().map(|f| f.key.as_str()));
        padded_keys.extend(group.attention_mask.as_deref());
    }
    // Groups padded straight from the rows (the usual batch); the rest is gathered into
    // columns and padded by the core.
    let (keys, in_place, rest_plan, gathered) =
        match pad_groups_in_place(features, &plan, &padded_keys, &keys)? {
            None => {
                let (keys, gathered) = gather(features, &padded_keys, keys, keep_arrays)?;
                (keys, Vec::new(), None, gathered)
            }
            Some(InPlace {
                keys,
                outputs,
                rest_groups,
            }) => {
                let rest = keys.filtered(|key| !outputs.iter().any(|o| o.key == key));
                let gathered = if rest.names.is_empty() {
                    Vec::new()
                } else {
                    gather(features, &padded_keys, Some(rest), keep_arrays)?.1
                };
                let rest_plan = Plan {
                    groups: rest_groups,
                    ..plan.clone()
                };
                (keys, outputs, Some(rest_plan), gathered)
            }
        };
    let mut numeric = Vec::new();
    let mut raw = HashMap::new();
    let gathered_keys = keys
        .names
        .iter()
        .filter(|key| !in_place.iter().any(|o| &o.key == *key));
    for (key, g) in gathered_keys.zip(gathered) {
        if g.is_raw {
            raw.insert(key.clone(), g.raw);
        } else {
            numeric.push(g.column);
        }
    }
    if numeric.is_empty() && in_place.is_empty() && raw.values().next().is_none_or(|r| r.is_empty())
    {
        return Err(CollateError::EmptyBatch.into());
    }
    let outputs = if numeric.is_empty() {
        Vec::new()
    } else {
        let core_plan = rest_plan.as_ref().unwrap_or(&plan);
        py.detach(|| pad::collate(numeric, core_plan))?
    };
    let mut outputs: HashMap<String, Output> = outputs
        .into_iter()
        .chain(in_place)
        .map(|o| (o.key.clone(), o))
        .collect();
    let result = PyDict::new(py);
    let created: Vec<String> = plan
        .groups
        .iter()
        .filter_map(|g| g.attention_mask.clone())
        .filter(|k| !keys.names.contains(k))
        .collect();
    let created = BatchKeys::named(py, created);
    let all_keys = keys.names.iter().zip(&keys.objects);
    for (name, object) in all_keys.chain(created.names.iter().zip(&created.objects)) {
        if let Some(values) = raw.remove(name) {
            result.set_item(object, PyList::new(py, values)?)?;
        } else if let Some(output) = outputs.remove(name) {
            result.set_item(object, output_to_py(py, output)?)?;
        }
    }
    Ok(result)
}

#[pymodule(gil_used = false)]
mod _native {
    #[pymodule_export]
    use super::arrow::{collate_arrow, ArrowColumnHandle};
    #[pymodule_export]
    use super::collate;
    #[pymodule_export]
    use super::flatten::flatten_batch;
    #[pymodule_export]
    use super::grouping::group_by_length;
    #[pymodule_export]
    use super::masking::mask_tokens;
    #[pymodule_export]
    use super::sampling::{pack_epoch, rebalance_epoch};

    #[pymodule_init]
    fn init(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
        use pyo3::types::PyModuleMethods;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add(
            "build_profile",
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
        )?;
        Ok(())
    }
}
