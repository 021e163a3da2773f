//! A batch's keys, and a row's value under one of them, looked up with the row's own key
//! objects.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::core::error::CollateError;

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

/// The first key a later row holds that the first row lacks, as an error naming the key and the
/// row: a batch is collated under its first row's keys, so such a key would be left out. Only
/// a row with a different number of keys is looked into (a row with as many keys and one of
/// them different also lacks one of the first row's, which is reported where it is read).
/// Rows that are not a list or tuple of mappings are left to the reader, which reports them.
pub fn check_no_later_keys(features: &Bound<'_, PyAny>) -> PyResult<()> {
    let rows: Vec<Bound<'_, PyAny>> = if let Ok(list) = features.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = features.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Ok(());
    };
    let Some(first) = rows.first() else {
        return Ok(());
    };
    let count = |row: &Bound<'_, PyAny>| match row.cast_exact::<PyDict>() {
        Ok(dict) => Some(dict.len()),
        Err(_) => row.len().ok(),
    };
    let Some(first_count) = count(first) else {
        return Ok(());
    };
    for (index, row) in rows.iter().enumerate().skip(1) {
        if count(row).is_none_or(|n| n == first_count) {
            continue;
        }
        let keys = match row.cast_exact::<PyDict>() {
            Ok(dict) => dict.keys().into_any(),
            Err(_) => match row.call_method0("keys") {
                Ok(keys) => keys,
                Err(_) => continue, // not a mapping: the reader says so
            },
        };
        for key in keys.try_iter()? {
            let key = key?;
            if !first.contains(&key)? {
                return Err(CollateError::ExtraKey {
                    key: key.str()?.to_string(),
                    row: index,
                }
                .into());
            }
        }
    }
    Ok(())
}
