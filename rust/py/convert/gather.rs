//! The reader's lax route (`Reader::lax`): walking a batch of mappings once, attached to the
//! interpreter, by the batch's keys (`BatchKeys`, the rows' own key objects) and a row's value
//! under each (`row_value`): every key's values read into a core column, or kept as the
//! Python objects when they are not numbers.

use pyo3::exceptions::{PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::core::column::Column;
use crate::core::error::CollateError;

use super::read::{self, ReadError, Site};
use super::torch;

/// One key's values across the batch: numbers in `column`, unless some value was not numeric,
/// in which case the raw Python objects are handed back as a list (`raw` is kept only for keys
/// that may end up raw: padded keys are numbers or an error).
pub struct Gathered<'py> {
    pub column: Column,
    pub raw: Vec<Bound<'py, PyAny>>,
    pub is_raw: bool,
    pub padded: bool,
    /// Handed back raw as soon as a value is a numpy or torch value (see `collate`).
    pub keep_arrays: bool,
    /// Handed back raw as soon as a value is a numpy scalar other than an int64 (see
    /// `read::is_numpy_scalar_of_own_dtype`).
    pub keep_numpy_scalars: bool,
}

/// Which values make a key outside the pad groups come back as its raw Python objects, besides
/// values that are not numbers (`collate`'s `keep_arrays` and `keep_numpy_scalars`).
#[derive(Clone, Copy, Default)]
pub struct KeepRaw<'a> {
    /// Any numpy or torch value.
    pub arrays: bool,
    /// A numpy scalar other than an int64.
    pub numpy_scalars: bool,
    /// Keys whose dtype the caller has fixed (`collate`'s `dtypes`): their values are read as
    /// numbers, and cast, whatever they are.
    pub typed_keys: &'a [&'a str],
}

pub fn key_string(key: &Bound<'_, PyAny>) -> PyResult<String> {
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
pub struct BatchKeys<'py> {
    pub names: Vec<String>,
    pub objects: Vec<Bound<'py, PyString>>,
}

impl<'py> BatchKeys<'py> {
    pub fn named(py: Python<'py>, names: Vec<String>) -> Self {
        let objects = names.iter().map(|name| PyString::new(py, name)).collect();
        BatchKeys { names, objects }
    }

    /// The keys of `row` (a mapping), in its order.
    pub fn of_row(row: &Bound<'py, PyAny>) -> PyResult<Self> {
        let size = row.cast_exact::<PyDict>().map_or(0, |dict| dict.len());
        let mut names = Vec::with_capacity(size);
        let mut objects = Vec::with_capacity(size);
        let mut add = |key: Bound<'py, PyAny>| -> PyResult<()> {
            names.push(key_string(&key)?);
            objects.push(key.cast_into::<PyString>()?);
            Ok(())
        };
        if let Ok(dict) = row.cast_exact::<PyDict>() {
            // Walked in place: no list of the keys is made.
            for (key, _) in dict.iter() {
                add(key)?;
            }
        } else {
            for key in row.call_method0("keys")?.try_iter()? {
                add(key?)?;
            }
        }
        Ok(BatchKeys { names, objects })
    }

    /// The keys `keep` accepts, in order.
    pub fn filtered(&self, keep: impl Fn(&str) -> bool) -> Self {
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
pub fn row_value<'py>(
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
    if !gathered.is_raw
        && ((gathered.keep_arrays && read::is_array_value(&value))
            || (gathered.keep_numpy_scalars && read::is_numpy_scalar_of_own_dtype(&value))
            || ((gathered.keep_arrays || gathered.keep_numpy_scalars)
                && read::holds_numpy_scalar_of_own_dtype(&value)))
    {
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
    if !values.first().is_some_and(torch::is_torch_tensor) {
        return Ok(false);
    }
    Ok(read::read_tensor_rows(&mut gathered.column, values)?
        || read::read_tensor_scalars(&mut gathered.column, values)?)
}

/// Walks the batch once: a list/tuple of mappings (rows), or a mapping of key -> rows.
pub fn gather<'py>(
    features: &Bound<'py, PyAny>,
    padded_keys: &[&str],
    only_keys: Option<BatchKeys<'py>>,
    keep: KeepRaw<'_>,
) -> PyResult<(BatchKeys<'py>, Vec<Gathered<'py>>)> {
    // No torch function mode runs while the rows are read (see `torch::modes_off`).
    let _modes_off = torch::modes_off(features.py())?;
    let new_gathered = |key: &str, rows: usize| {
        let padded = padded_keys.contains(&key);
        let typed = keep.typed_keys.contains(&key);
        Gathered {
            column: Column::with_capacity(key, rows, 0),
            raw: Vec::with_capacity(if padded { 0 } else { rows }),
            is_raw: false,
            padded,
            keep_arrays: keep.arrays && !padded && !typed,
            keep_numpy_scalars: keep.numpy_scalars && !padded && !typed,
        }
    };
    let rows: Vec<Bound<'py, PyAny>> = if let Ok(list) = features.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = features.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        // Columnar input: a mapping of key -> sequence of rows (already a dict of lists).
        let mapping = features;
        if !mapping.hasattr("keys")? {
            return Err(PyTypeError::new_err(format!(
                "a batch is a list or tuple of rows (mappings) or a mapping of columns, not {}",
                mapping.get_type().name()?
            )));
        }
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
            // (Not when tensors are to be kept: the values are then read one by one.)
            if gathered.keep_arrays || !add_tensor_values(&mut gathered, &values)? {
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
            .is_some_and(|value| torch::is_torch_tensor(&value));
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
