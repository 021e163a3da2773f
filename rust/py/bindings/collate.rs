//! The `collate` binding: pads the groups it can straight from the rows (the reader's strict
//! route, `collate_rows`), gathers the rest into columns for the core (its lax route),
//! and hands every output out through `output_buffers::hand_out` (to numpy, to torch, or
//! copied into a provider's tensors).

use std::collections::HashMap;
use std::ptr;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};

use crate::core::error::CollateError;
use crate::core::pad::{self, DType, Layout, Output, Plan};

use crate::py::convert::collate_rows::{self, StrictGroups};
use crate::py::convert::gather::{gather, BatchKeys, KeepRaw};
use crate::py::convert::pad_plan::{build_plan, PyPadGroup};
use crate::py::convert::reader;
use crate::py::convert::torch;
use crate::py::output::numpy_arrays::output_to_py;
use crate::py::output::output_buffers::{hand_out, OutputBuffers};
use crate::py::output::torch_tensors;

/// `collate`'s `keep_arrays` and `keep_numpy_scalars` (see `gather::KeepRaw`).
#[derive(Clone, Copy)]
struct Keep {
    arrays: bool,
    numpy_scalars: bool,
}

/// Collates a batch: gathers every key of the first row (attached), pads the groups and stacks
/// the rest (detached), and returns an ordered dict of numpy arrays. Keys whose values are not
/// numbers come back as lists of the original objects, for the caller to handle; with
/// `keep_arrays`, so do keys outside the pad groups holding a numpy or torch value (which
/// tokenizer.pad leaves to BatchEncoding when the main input is Python lists); with
/// `keep_numpy_scalars`, so do keys outside the pad groups holding a numpy scalar other than an
/// int64 (whose dtype tokenizer.pad's conversion keeps, see
/// `read::is_numpy_scalar_of_own_dtype`). With `to_tensor` (e.g. `torch.from_numpy`), every numeric output array is passed through it
/// before it goes into the dict: the caller's conversion loop, done here. With
/// `output_buffer` (`(key, shape, dtype) -> torch.Tensor`), each output that is not ragged is
/// copied into the tensor it returns once the whole batch is read and padded, and that tensor
/// is the output (see `output_buffers`); where torch has no DLPack exchange table it is not
/// called.
#[pyfunction]
#[pyo3(signature = (
    features, groups, *, float32, allow_ragged=false, dtypes=None, keys=None, keep_arrays=false,
    keep_numpy_scalars=false, to_tensor=None, output_buffer=None
))]
#[allow(clippy::too_many_arguments)]
pub fn collate<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    groups: Vec<Bound<'py, PyPadGroup>>,
    float32: bool,
    allow_ragged: bool,
    dtypes: Option<HashMap<String, DType>>,
    keys: Option<Vec<String>>,
    keep_arrays: bool,
    keep_numpy_scalars: bool,
    to_tensor: Option<Bound<'py, PyAny>>,
    output_buffer: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let plan = build_plan(groups, float32, allow_ragged, dtypes)?;
    let keys = keys.map(|names| BatchKeys::named(py, names));
    let keep = Keep {
        arrays: keep_arrays,
        numpy_scalars: keep_numpy_scalars,
    };
    let buffers = output_buffer.as_ref().and_then(OutputBuffers::new);
    collate_with(py, features, &plan, keys, keep, to_tensor.as_ref(), buffers)
}

/// `collate`'s options settled once for many calls (a collator's call plan): the pad plan
/// already parsed, so that a call converts nothing but the rows. With `batch_encoding` (the
/// BatchEncoding class), a batch of arrays or tensors alone is also finished here as the
/// caller would finish it: keys renamed by `renames`, in a bare BatchEncoding given `data` and
/// `batch_encoding_attributes` (what an empty one holds besides `data`). The caller states
/// both; nothing here knows transformers' private names or its label rule.
#[pyclass(frozen, name = "CollatePlan", module = "fastcollate._native")]
pub struct PyCollatePlan {
    plan: Plan,
    keep: Keep,
    to_tensor: Option<Py<PyAny>>,
    finish: Option<Finish>,
}

/// How `collate_planned` finishes a batch of arrays or tensors alone (see `PyCollatePlan`).
struct Finish {
    class: Py<PyType>,
    attributes: Vec<(Py<PyString>, Py<PyAny>)>,
    renames: Vec<(Py<PyString>, Py<PyString>)>,
}

#[pymethods]
impl PyCollatePlan {
    #[new]
    #[pyo3(signature = (
        groups, *, float32, keep_arrays=false, keep_numpy_scalars=false, to_tensor=None,
        batch_encoding=None, batch_encoding_attributes=None, renames=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        groups: Vec<Bound<'_, PyPadGroup>>,
        float32: bool,
        keep_arrays: bool,
        keep_numpy_scalars: bool,
        to_tensor: Option<Py<PyAny>>,
        batch_encoding: Option<Py<PyType>>,
        batch_encoding_attributes: Option<Bound<'_, PyDict>>,
        renames: Option<Vec<(String, String)>>,
    ) -> PyResult<Self> {
        let finish = match batch_encoding {
            None => None,
            Some(class) => {
                let mut attributes = Vec::new();
                for (name, value) in batch_encoding_attributes.iter().flatten() {
                    let name: String = name.extract()?;
                    attributes.push((PyString::intern(py, &name).unbind(), value.unbind()));
                }
                let renames = renames
                    .iter()
                    .flatten()
                    .map(|(old, new)| {
                        (
                            PyString::intern(py, old).unbind(),
                            PyString::intern(py, new).unbind(),
                        )
                    })
                    .collect();
                Some(Finish {
                    class,
                    attributes,
                    renames,
                })
            }
        };
        Ok(PyCollatePlan {
            plan: build_plan::<DType>(groups, float32, false, None)?,
            keep: Keep {
                arrays: keep_arrays,
                numpy_scalars: keep_numpy_scalars,
            },
            to_tensor,
            finish,
        })
    }
}

/// `collate(rows, groups, **options)` for the groups and options `plan` holds: the same
/// output and errors. With the plan's `batch_encoding`, a batch holding no list (every key
/// an array or tensor) comes back finished: the plan's renames applied in order (popped, then
/// set), in a BatchEncoding whose `data` is the dict; any other batch comes back as the dict,
/// for the caller to finish.
#[pyfunction]
pub fn collate_planned<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyAny>,
    plan: &Bound<'py, PyCollatePlan>,
) -> PyResult<Bound<'py, PyAny>> {
    let plan = plan.get();
    let batch = collate_with(
        py,
        rows,
        &plan.plan,
        None,
        plan.keep,
        plan.to_tensor(py),
        None,
    )?;
    plan.finished(batch)
}

/// `outputs` (none of them ragged) as `collate_planned` returns a batch of them: each handed
/// out through the plan's `to_tensor` (or as a numpy array) under its key in `keys`, in order,
/// then finished by the plan. The benchmark floor's way out (`PadFloor.pad_handed_out`).
pub fn planned_outputs<'py>(
    py: Python<'py>,
    keys: Vec<Bound<'py, PyString>>,
    outputs: Vec<Output>,
    plan: &PyCollatePlan,
) -> PyResult<Bound<'py, PyAny>> {
    let handed = hand_out(None, outputs, output_converter(py, plan.to_tensor(py)))?;
    let batch = PyDict::new(py);
    for (key, value) in keys.into_iter().zip(handed) {
        batch.set_item(key, value)?;
    }
    plan.finished(batch)
}

impl PyCollatePlan {
    /// The pad plan, parsed once.
    pub fn pad_plan(&self) -> &Plan {
        &self.plan
    }

    /// The plan's `to_tensor`, bound.
    pub fn to_tensor<'a, 'py>(&'a self, py: Python<'py>) -> Option<&'a Bound<'py, PyAny>> {
        self.to_tensor.as_ref().map(|f| f.bind(py))
    }

    /// `batch` as the planned call returns it: with the plan's `batch_encoding`, a batch
    /// holding no list comes back finished (see `collate_planned`); any other as it is.
    pub fn finished<'py>(&self, batch: Bound<'py, PyDict>) -> PyResult<Bound<'py, PyAny>> {
        let py = batch.py();
        let Some(finish) = &self.finish else {
            return Ok(batch.into_any());
        };
        if batch
            .iter()
            .any(|(_, value)| value.is_exact_instance_of::<PyList>())
        {
            return Ok(batch.into_any());
        }
        for (old, new) in &finish.renames {
            if let Some(value) = batch.get_item(old)? {
                batch.del_item(old)?;
                batch.set_item(new, value)?;
            }
        }
        // `class.__new__(class)` through the type's own slot, then `data` and the other
        // attributes set in the order an empty one holds them.
        let class = finish.class.bind(py);
        // SAFETY: `tp_new` is the class's constructor slot (a class always has one, inherited
        // from `object` at least), called with the class and an empty argument tuple as
        // `class.__new__(class)` calls it; a null result is an error set by it.
        let encoding = unsafe {
            let new: Option<ffi::newfunc> =
                std::mem::transmute(ffi::PyType_GetSlot(class.as_type_ptr(), ffi::Py_tp_new));
            let Some(new) = new else {
                return Err(PyTypeError::new_err(
                    "the BatchEncoding class cannot be instantiated",
                ));
            };
            let empty = PyTuple::empty(py);
            Bound::from_owned_ptr_or_err(
                py,
                new(class.as_type_ptr(), empty.as_ptr(), ptr::null_mut()),
            )?
        };
        encoding.setattr(intern!(py, "data"), batch)?;
        for (name, value) in &finish.attributes {
            encoding.setattr(name.bind(py), value.bind(py))?;
        }
        Ok(encoding)
    }
}

/// How an output leaves a call: through `to_tensor` (a ragged one excepted), where
/// `torch.from_numpy` is made straight from the buffer (`torch_tensors`), else as a numpy
/// array.
pub fn output_converter<'a, 'py>(
    py: Python<'py>,
    to_tensor: Option<&'a Bound<'py, PyAny>>,
) -> impl FnMut(Output) -> PyResult<Bound<'py, PyAny>> + 'a
where
    'py: 'a,
{
    let direct = to_tensor.is_some_and(torch_tensors::is_torch_from_numpy);
    move |output: Output| {
        let ragged = matches!(output.layout, Layout::Ragged { .. });
        match to_tensor {
            Some(convert) if !ragged => torch_tensors::converted(py, output, convert, direct),
            _ => output_to_py(py, output),
        }
    }
}

fn collate_with<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    plan: &Plan,
    keys: Option<BatchKeys<'py>>,
    keep: Keep,
    to_tensor: Option<&Bound<'py, PyAny>>,
    buffers: Option<OutputBuffers<'py>>,
) -> PyResult<Bound<'py, PyDict>> {
    let members = plan.groups.iter().map(|g| g.followers.len() + 2).sum();
    let mut padded_keys: Vec<&str> = Vec::with_capacity(members);
    for group in &plan.groups {
        padded_keys.push(&group.lead);
        padded_keys.extend(group.followers.iter().map(|f| f.key.as_str()));
        padded_keys.extend(group.attention_mask.as_deref());
    }
    let typed_keys: Vec<&str> = plan.dtypes.keys().map(String::as_str).collect();
    let keep = KeepRaw {
        arrays: keep.arrays,
        numpy_scalars: keep.numpy_scalars,
        typed_keys: &typed_keys,
    };
    if keys.is_none() {
        // The batch's keys are its first row's: a key only later rows hold would be left out.
        reader::check_no_later_keys(features)?;
    }
    // No torch function mode runs while the rows are read (see `torch::modes_off`).
    let modes_off = torch::modes_off(py)?;
    // Groups padded straight from the rows (the usual batch: a list or tuple of exact dicts,
    // taken in one pass); the rest is gathered into columns and padded by the core.
    let strict = match reader::exact_dicts(features) {
        Some(rows) => collate_rows::strict_groups(rows, plan, &padded_keys, &keys, keep.arrays)?,
        None => None,
    };
    let (keys, strict_outputs, rest_plan, gathered) = match strict {
        None => {
            let (keys, gathered) = gather(features, &padded_keys, keys, keep)?;
            (keys, Vec::new(), None, gathered)
        }
        Some(StrictGroups {
            keys,
            rows,
            outputs,
            rest_groups,
        }) => {
            let padded_here = |key: &str| outputs.iter().any(|o| o.key == key);
            let gathered = if keys.names.iter().all(|key| padded_here(key)) {
                Vec::new()
            } else {
                let rest = keys.filtered(|key| !padded_here(key));
                // The rows read above, not `features` again: Python code that ran since (a
                // patched tensor method, a `__del__`) may have added or removed rows, and every
                // key comes from the same rows.
                let same_rows = PyList::new(py, &rows)?;
                gather(same_rows.as_any(), &padded_keys, Some(rest), keep)?.1
            };
            // The plan for what is left to the core, the padded groups taken out.
            let rest_plan = (!gathered.is_empty()).then(|| Plan {
                groups: rest_groups,
                float_dtype: plan.float_dtype,
                allow_ragged: plan.allow_ragged,
                dtypes: plan.dtypes.clone(),
            });
            (keys, outputs, rest_plan, gathered)
        }
    };
    drop(modes_off);
    // Few keys: looked up by scanning, not hashing. `raw` holds indices into `keys`.
    let mut numeric = Vec::new();
    let mut raw: Vec<(usize, Vec<Bound<'py, PyAny>>)> = Vec::new();
    let gathered_keys = keys
        .names
        .iter()
        .enumerate()
        .filter(|(_, key)| !strict_outputs.iter().any(|o| &o.key == *key));
    for ((index, _), g) in gathered_keys.zip(gathered) {
        if g.is_raw {
            raw.push((index, g.raw));
        } else {
            numeric.push(g.column);
        }
    }
    if numeric.is_empty()
        && strict_outputs.is_empty()
        && raw.first().is_none_or(|(_, r)| r.is_empty())
    {
        return Err(CollateError::EmptyBatch.into());
    }
    let mut outputs = if numeric.is_empty() {
        Vec::new()
    } else {
        let core_plan = rest_plan.as_ref().unwrap_or(plan);
        py.detach(|| pad::collate(numeric, core_plan))?
    };
    outputs.extend(strict_outputs);
    // The last output under a key wins, as a later insert into a map would.
    let take = |outputs: &mut Vec<Output>, name: &str| {
        outputs
            .iter()
            .rposition(|o| o.key == name)
            .map(|i| outputs.swap_remove(i))
    };
    // Each key's entry in order: its raw list, or its output (handed out below).
    let mut entries: Vec<(Bound<'py, PyString>, Option<Bound<'py, PyAny>>)> = Vec::new();
    let mut leaving: Vec<Output> = Vec::new();
    for (index, (name, object)) in keys.names.iter().zip(&keys.objects).enumerate() {
        if let Some(at) = raw.iter().position(|(i, _)| *i == index) {
            let (_, values) = raw.swap_remove(at);
            entries.push((object.clone(), Some(PyList::new(py, values)?.into_any())));
        } else if let Some(output) = take(&mut outputs, name) {
            entries.push((object.clone(), None));
            leaving.push(output);
        }
    }
    // Attention masks the rows did not hold, made by the padding.
    for group in &plan.groups {
        let Some(mask) = &group.attention_mask else {
            continue;
        };
        if keys.names.contains(mask) {
            continue;
        }
        if let Some(output) = take(&mut outputs, mask) {
            entries.push((PyString::new(py, mask), None));
            leaving.push(output);
        }
    }
    let mut handed =
        hand_out(buffers.as_ref(), leaving, output_converter(py, to_tensor))?.into_iter();
    let result = PyDict::new(py);
    for (object, value) in entries {
        match value {
            Some(value) => result.set_item(object, value)?,
            None => {
                if let Some(value) = handed.next() {
                    result.set_item(object, value)?;
                }
            }
        }
    }
    Ok(result)
}
