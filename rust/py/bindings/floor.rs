//! The benchmark's floor (`python -m fastcollate bench` and `benches/bench_fixed_cost.py`,
//! nothing else calls it): the least work
//! a padding call must do for the same rows, timed beside fastcollate so that the report can say
//! how far a call is from it. Every row of every padded key is read once and written into
//! int64 buffers allocated when the floor is made (before anything is timed) and reused by
//! every call; each label is read once. A list is read item by item as the reader reads one
//! (`convert::ints`: an exact list of exact ints), a 1-d int64 numpy array is copied with one
//! `copy_from_slice` (a `memcpy`). A torch tensor (handed to the floor only as the sound
//! route's floor, see `bench/floor.py`) pays what any reader that vouches for a tensor's memory
//! must: torch function modes turned off for the batch, then per tensor its `is_neg()` through
//! `TensorBase`'s own method and one DLPack description (`tensor_ints`), before its values are
//! copied. `pad` allocates and hands out no output and parses no option: right padding to the
//! longest row, int64, and nothing else; `pad_handed_out` then hands fresh copies of its
//! buffers out as a planned call hands out its batch (the floor of a call that returns one).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use numpy::PyUntypedArray;

use crate::core::error::CollateError;
use crate::core::pad::{Data, Layout, Output};
use crate::core::sizes;
use crate::py::bindings::collate::{planned_outputs, PyCollatePlan};
use crate::py::convert::array_values::{with_values, IntElement, IntValuesVisitor};
use crate::py::convert::ints::write_exact_ints;
use crate::py::convert::reader::{classify, ValueKind};
use crate::py::convert::tensor_ints::{self, TensorInts};
use crate::py::convert::torch::{modes_off, tensor_length};
use crate::py::output::numpy_arrays::{matrix, vector};

/// Padded keys and their pad values, an optional label, and one reused int64 buffer per padded
/// key (`max_rows × max_length` values) plus the labels'.
#[pyclass(name = "PadFloor", module = "fastcollate._native")]
pub struct PyPadFloor {
    keys: Vec<Py<PyString>>,
    names: Vec<String>,
    pad_values: Vec<i64>,
    /// `label` read into `labels`.
    label: Option<Label>,
    max_rows: usize,
    max_length: usize,
    buffers: Vec<Vec<i64>>,
    labels: Vec<i64>,
    /// The last call's rows and padded length.
    shape: (usize, usize),
}

/// The label the floor reads: the rows' key, and the output's key as a Rust string (for
/// errors and the core's `Output`) and as the Python string the batch is keyed by.
struct Label {
    key: Py<PyString>,
    output: String,
    output_key: Py<PyString>,
}

/// A bad argument or row, as the floor's error (no key or row of its own to name).
fn invalid(message: String) -> PyErr {
    CollateError::InvalidOption(message).into()
}

/// The name of `value`'s type, for an error.
fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|name| name.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A buffer of `shape` for `key`, every value written once now so that no call pays for its
/// first touch: sized by the one sizing rule, reserved fallibly.
fn buffer(key: &str, shape: &[usize]) -> PyResult<Vec<i64>> {
    let elements = sizes::output_elements::<i64>(key, shape)?;
    let mut values = reserved(key, elements)?;
    values.resize(elements, 0);
    Ok(values)
}

/// An empty buffer with room for `elements` values of `key`, reserved fallibly.
fn reserved(key: &str, elements: usize) -> PyResult<Vec<i64>> {
    let mut values = Vec::new();
    values
        .try_reserve_exact(elements)
        .map_err(|_| CollateError::OutOfMemory {
            key: key.into(),
            bytes: elements.saturating_mul(size_of::<i64>()),
        })?;
    Ok(values)
}

/// Copies a tensor's values into a row of the same length (false: another length).
struct CopyInto<'a> {
    out: &'a mut [i64],
}

impl IntValuesVisitor for CopyInto<'_> {
    type Output = bool;
    fn visit<T: IntElement>(self, values: &[T]) -> bool {
        if values.len() != self.out.len() {
            return false;
        }
        for (slot, &value) in self.out.iter_mut().zip(values) {
            *slot = value.wrapping_i64();
        }
        true
    }
}

#[pymethods]
impl PyPadFloor {
    #[new]
    #[pyo3(signature = (keys, pad_values, label, max_rows, max_length))]
    fn new(
        py: Python<'_>,
        keys: Vec<String>,
        pad_values: Vec<i64>,
        label: Option<(String, String)>,
        max_rows: usize,
        max_length: usize,
    ) -> PyResult<Self> {
        if keys.len() != pad_values.len() {
            return Err(invalid(format!(
                "the floor takes one pad value per key: {} keys, {} pad values",
                keys.len(),
                pad_values.len()
            )));
        }
        let buffers = keys
            .iter()
            .map(|key| buffer(key, &[max_rows, max_length]))
            .collect::<PyResult<Vec<_>>>()?;
        let labels = match &label {
            Some((_, output)) => buffer(output, &[max_rows])?,
            None => Vec::new(),
        };
        Ok(PyPadFloor {
            keys: keys
                .iter()
                .map(|key| PyString::intern(py, key).unbind())
                .collect(),
            names: keys,
            pad_values,
            label: label.map(|(key, output)| Label {
                key: PyString::intern(py, &key).unbind(),
                output_key: PyString::intern(py, &output).unbind(),
                output,
            }),
            max_rows,
            max_length,
            buffers,
            labels,
            shape: (0, 0),
        })
    }

    /// Pads `rows` (a list of dicts) into the buffers. First every Python-level answer (each
    /// value's type and length, each label), then the values, written with no Python code run
    /// in between.
    fn pad(&mut self, rows: &Bound<'_, PyList>) -> PyResult<()> {
        let py = rows.py();
        let count = rows.len();
        if count == 0 {
            return Err(CollateError::EmptyBatch.into());
        }
        if count > self.max_rows {
            return Err(invalid(format!(
                "the floor's buffers hold {} rows, not {count}",
                self.max_rows
            )));
        }
        // As every read of rows: no torch function mode runs while tensors are asked and read.
        let _modes_off = modes_off(py)?;
        let keys: Vec<&Bound<'_, PyString>> = self.keys.iter().map(|key| key.bind(py)).collect();
        // Each value with its kind and length, as read.
        let mut values: Vec<(Bound<'_, PyAny>, ValueKind, usize)> = Vec::new();
        values
            .try_reserve_exact(count.saturating_mul(keys.len()))
            .map_err(|_| invalid(format!("no memory to read {count} rows")))?;
        let mut longest = 0;
        for (index, row) in rows.iter().take(count).enumerate() {
            let row = row.cast_into::<PyDict>().map_err(|err| {
                PyErr::from(CollateError::NotAMapping {
                    row: index,
                    type_name: type_name(&err.into_inner()),
                })
            })?;
            for (key, name) in keys.iter().zip(&self.names) {
                let Some(value) = row.get_item(*key)? else {
                    return Err(CollateError::MissingKey {
                        key: name.clone(),
                        row: index,
                    }
                    .into());
                };
                // What the value is, as the one reader decides it (`reader::classify`).
                let kind = classify(&value);
                let length = match kind {
                    ValueKind::List(length) | ValueKind::Array(length) => Some(length),
                    ValueKind::Tensor => tensor_length(&value),
                    _ => None,
                };
                let Some(length) = length else {
                    return Err(invalid(format!(
                        "the floor reads '{name}' in row {index} as a list of ints, a 1-d \
                         int64 numpy array or a 1-d integer tensor, not a {}",
                        type_name(&value)
                    )));
                };
                longest = longest.max(length);
                values.push((value, kind, length));
            }
            if let Some(Label { key, output, .. }) = &self.label {
                let Some(label) = row.get_item(key.bind(py))? else {
                    return Err(CollateError::MissingKey {
                        key: key.bind(py).to_string(),
                        row: index,
                    }
                    .into());
                };
                let slot = self
                    .labels
                    .get_mut(index)
                    .ok_or_else(|| invalid(format!("no room for '{output}' in row {index}")))?;
                *slot = label.extract::<i64>()?;
            }
        }
        if longest > self.max_length {
            return Err(invalid(format!(
                "the floor's buffers hold rows of at most {} values, not {longest}",
                self.max_length
            )));
        }
        // The tensors' Python-level answers (each exact and not negated), then their views,
        // as the sound route takes them (`collate_rows::members_rows`).
        let key_count = keys.len();
        // Value `i` (row-major: row `i / key_count`, key `i % key_count`) is a tensor the sound
        // route does not read in place.
        let names = &self.names;
        let unreadable = |i: usize| {
            invalid(format!(
                "the floor reads '{}' in row {} only as an exact, unnegated 1-d integer CPU \
                 tensor",
                names[i % key_count],
                i / key_count
            ))
        };
        if let Some(i) = values.iter().position(|(value, kind, _)| {
            *kind == ValueKind::Tensor && !tensor_ints::readable_in_place(value)
        }) {
            return Err(unreadable(i));
        }
        // Beside each value, its tensor's view (None: not a tensor).
        let mut views: Vec<Option<TensorInts<'_>>> = Vec::new();
        views
            .try_reserve_exact(values.len())
            .map_err(|_| invalid(format!("no memory to read {count} rows")))?;
        for (i, (value, kind, _)) in values.iter().enumerate() {
            views.push(match kind {
                ValueKind::Tensor => {
                    Some(tensor_ints::int_values(value, 1).ok_or_else(|| unreadable(i))?)
                }
                _ => None,
            });
        }
        // No Python code runs from here on: the lists, arrays and tensors stay as they were
        // read.
        for (k, (buffer, &pad)) in self.buffers.iter_mut().zip(&self.pad_values).enumerate() {
            let name = &self.names[k];
            for index in 0..count {
                let start = index * longest;
                let (Some((value, kind, length)), Some(view), Some(row)) = (
                    values.get(index * key_count + k),
                    views.get(index * key_count + k),
                    buffer.get_mut(start..start + longest),
                ) else {
                    return Err(invalid(format!("'{name}' in row {index} was not read")));
                };
                let (written, padding) = row.split_at_mut((*length).min(longest));
                let whole = match (kind, value.cast::<PyUntypedArray>()) {
                    (ValueKind::Tensor, _) => view
                        .as_ref()
                        .is_some_and(|view| view.visit(CopyInto { out: written })),
                    (ValueKind::Array(_), Ok(array)) => with_values::<i64, _>(array, |source| {
                        if source.len() == written.len() {
                            written.copy_from_slice(source);
                            true
                        } else {
                            false
                        }
                    })
                    .unwrap_or(false),
                    (ValueKind::List(_), _) => write_exact_ints(value, true, written),
                    _ => false,
                };
                if !whole {
                    return Err(invalid(format!(
                        "the floor could not read '{name}' in row {index}: it takes a list of \
                         exact ints in the int64 range or a 1-d int64 numpy array"
                    )));
                }
                padding.fill(pad);
            }
        }
        self.shape = (count, longest);
        Ok(())
    }

    /// `pad`, then the padded keys and labels handed out as a planned call hands out its batch
    /// (`collate::planned_outputs` with `plan`'s `to_tensor` and finish: tensors or arrays in
    /// a BatchEncoding): each output a fresh buffer, filled by one copy of the values `pad`
    /// wrote. The floor of a call that returns its batch; the copy is more than a call does,
    /// and shows only where rows are long.
    fn pad_handed_out<'py>(
        &mut self,
        rows: &Bound<'py, PyList>,
        plan: &Bound<'py, PyCollatePlan>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = rows.py();
        self.pad(rows)?;
        let (count, length) = self.shape;
        let fresh = |name: &str, values: &[i64]| -> PyResult<Vec<i64>> {
            let mut out = reserved(name, values.len())?;
            out.extend_from_slice(values);
            Ok(out)
        };
        let mut keys = Vec::with_capacity(self.keys.len() + 1);
        let mut outputs = Vec::with_capacity(self.keys.len() + 1);
        for ((key, name), buffer) in self.keys.iter().zip(&self.names).zip(&self.buffers) {
            let values = buffer.get(..count * length).unwrap_or_default();
            keys.push(key.bind(py).clone());
            outputs.push(Output {
                key: name.clone(),
                data: Data::I64(fresh(name, values)?),
                layout: Layout::Matrix {
                    rows: count,
                    columns: length,
                },
            });
        }
        if let Some(Label {
            output, output_key, ..
        }) = &self.label
        {
            let values = self.labels.get(..count).unwrap_or_default();
            keys.push(output_key.bind(py).clone());
            outputs.push(Output {
                key: output.clone(),
                data: Data::I64(fresh(output, values)?),
                layout: Layout::Scalar { rows: count },
            });
        }
        planned_outputs(py, keys, outputs, plan.get())
    }

    /// The last call's outputs, copied out (not timed): each padded key as a `rows × longest`
    /// int64 array, and the labels.
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (rows, length) = self.shape;
        let out = PyDict::new(py);
        for (name, buffer) in self.names.iter().zip(&self.buffers) {
            let values = buffer.get(..rows * length).unwrap_or_default().to_vec();
            out.set_item(name, matrix(py, rows, length, values)?)?;
        }
        if let Some(Label { output, .. }) = &self.label {
            let values = self.labels.get(..rows).unwrap_or_default().to_vec();
            out.set_item(output, vector(py, values)?)?;
        }
        Ok(out)
    }
}
