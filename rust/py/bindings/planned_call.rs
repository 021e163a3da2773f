//! A `DataCollatorWithPadding` call plan's checks, made in one native call: the collator's
//! fields are the objects the plan was settled from, the tokenizer's state key is unchanged
//! (`tokenizer_state::has_state_key`), torch's default dtype is the plan's, and the rows are
//! of the usual kind; then the rows go straight to the collate plan for their main input's
//! kind. A call the plan does not serve is left to the caller (None), which takes the path
//! through `pad` and settles a new plan. The rows' kind is the one rule every padding entry
//! point asks (`usual_main_input_kind`).

use std::ffi::CString;

use numpy::PyUntypedArray;
use pyo3::exceptions::{PyAttributeError, PyUserWarning};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PyString, PyTuple};

use crate::py::bindings::collate::{collate_planned, PyCollatePlan};
use crate::py::bindings::tokenizer_state::has_state_key;
use crate::py::convert::torch::is_torch_tensor;

/// The checks and collate plans of a `DataCollatorWithPadding` call plan (see the module's
/// docs): `fields` are `(name, object)` pairs read from the collator by identity, the first
/// the tokenizer; `tokenizer_key` and `state_names` what `has_state_key` compares;
/// `default_dtype` torch's `get_default_dtype` and the dtype it gave (None: any); `main` the
/// main input's key; `plans` the collate plans for Python-list, numpy and torch main inputs;
/// `max_length_warning` the warning each served call gives (tokenizer.pad's, for a
/// `max_length` that `padding=True` ignores), None for none.
#[pyclass(frozen, name = "PlannedCall", module = "fastcollate._native")]
pub struct PyPlannedCall {
    fields: Vec<(Py<PyString>, Py<PyAny>)>,
    tokenizer_key: Py<PyTuple>,
    state_names: Py<PyTuple>,
    default_dtype: Option<(Py<PyAny>, Py<PyAny>)>,
    main: Py<PyString>,
    plans: [Py<PyCollatePlan>; 3],
    max_length_warning: Option<CString>,
}

/// The kinds of main input a usual batch holds, each served by its plan (`plans`, in this
/// order).
#[derive(Clone, Copy)]
enum MainInputKind {
    Lists = 0,
    Numpy = 1,
    Torch = 2,
}

#[pymethods]
impl PyPlannedCall {
    #[new]
    #[pyo3(signature = (
        fields, tokenizer_key, state_names, *, default_dtype, main, plans, max_length_warning
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        fields: Vec<(String, Py<PyAny>)>,
        tokenizer_key: Py<PyTuple>,
        state_names: Py<PyTuple>,
        default_dtype: Option<(Py<PyAny>, Py<PyAny>)>,
        main: String,
        plans: (Py<PyCollatePlan>, Py<PyCollatePlan>, Py<PyCollatePlan>),
        max_length_warning: Option<String>,
    ) -> PyResult<Self> {
        if fields.is_empty() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "a planned call reads the tokenizer field first",
            ));
        }
        let max_length_warning = max_length_warning
            .map(CString::new)
            .transpose()
            .map_err(|err| pyo3::exceptions::PyValueError::new_err(err.to_string()))?;
        Ok(PyPlannedCall {
            fields: fields
                .into_iter()
                .map(|(name, value)| (PyString::intern(py, &name).unbind(), value))
                .collect(),
            tokenizer_key,
            state_names,
            default_dtype,
            main: PyString::intern(py, &main).unbind(),
            plans: [plans.0, plans.1, plans.2],
            max_length_warning,
        })
    }

    /// Whether the plan holds for a call of `collator`: its fields are the plan's objects,
    /// the tokenizer's state key is unchanged and torch's default dtype is the plan's.
    fn holds(&self, collator: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = collator.py();
        for (name, expected) in &self.fields {
            if !collator.getattr(name.bind(py))?.is(expected) {
                return Ok(false);
            }
        }
        let tokenizer = self.fields[0].1.bind(py);
        if !has_state_key(
            tokenizer,
            self.tokenizer_key.bind(py),
            self.state_names.bind(py),
        )? {
            return Ok(false);
        }
        match &self.default_dtype {
            None => Ok(true),
            Some((get, expected)) => Ok(get.bind(py).call0()?.is(expected)),
        }
    }

    /// The batch of `collator(features)` where the plan serves it (`features` a list of
    /// exact dicts whose first holds a usual main input: a list starting with an int, a
    /// numpy array or a torch tensor, and an attention mask of at most one dimension, and
    /// `holds`); else None, before anything is read. The batch comes back as the collate
    /// plan gives it (finished, or a dict for the caller to finish).
    fn rows<'py>(
        &self,
        collator: &Bound<'py, PyAny>,
        features: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = collator.py();
        let Ok(rows) = features.cast_exact::<PyList>() else {
            return Ok(None);
        };
        let Ok(first) = rows.get_item(0) else {
            return Ok(None);
        };
        let Ok(first) = first.cast_into_exact::<PyDict>() else {
            return Ok(None);
        };
        let Some(kind) = first
            .get_item(self.main.bind(py))?
            .as_ref()
            .and_then(usual_kind)
        else {
            return Ok(None);
        };
        if !mask_of_one_dimension(first.get_item(intern!(py, "attention_mask"))?)? {
            return Ok(None);
        }
        if !self.holds(collator)? {
            return Ok(None);
        }
        if let Some(message) = &self.max_length_warning {
            // Attributed to the collator call's caller, as tokenizer.pad's warning is.
            PyErr::warn(py, &py.get_type::<PyUserWarning>(), message, 2)?;
        }
        collate_planned(py, features, self.plans[kind as usize].bind(py)).map(Some)
    }
}

/// The kind of row 0's main input `value` in the usual batches, from that value alone: a list
/// starting with an int (exactly those classes), a numpy array (exactly) or a torch tensor (its
/// subclasses too); None for anything else, which `pad` settles from the other rows.
fn usual_kind(value: &Bound<'_, PyAny>) -> Option<MainInputKind> {
    if let Ok(list) = value.cast_exact::<PyList>() {
        let first = list.get_item(0).ok()?;
        return first
            .is_exact_instance_of::<PyInt>()
            .then_some(MainInputKind::Lists);
    }
    if value.get_type().is(value.py().get_type::<PyUntypedArray>()) {
        return Some(MainInputKind::Numpy);
    }
    is_torch_tensor(value).then_some(MainInputKind::Torch)
}

/// `usual_kind` as tokenizer.pad names the kinds: None for Python lists, "np", "pt", and
/// "unusual" for a value that does not settle it alone (`main_input.usual_main_input_kind`,
/// the rule every padding entry point asks).
#[pyfunction]
pub fn usual_main_input_kind<'py>(value: &Bound<'py, PyAny>) -> Option<Bound<'py, PyString>> {
    let py = value.py();
    match usual_kind(value) {
        Some(MainInputKind::Lists) => None,
        Some(MainInputKind::Numpy) => Some(intern!(py, "np").clone()),
        Some(MainInputKind::Torch) => Some(intern!(py, "pt").clone()),
        None => Some(intern!(py, "unusual").clone()),
    }
}

/// Whether an attention mask leaves the batch to the plan: none, a list, or a value whose
/// `ndim` (0 without one) is at most 1 (a stacked mask is set aside by `pad`).
fn mask_of_one_dimension(mask: Option<Bound<'_, PyAny>>) -> PyResult<bool> {
    let Some(mask) = mask else {
        return Ok(true);
    };
    if mask.is_none() || mask.is_exact_instance_of::<PyList>() {
        return Ok(true);
    }
    match mask.getattr(intern!(mask.py(), "ndim")) {
        Ok(ndim) => ndim.le(1),
        Err(err) if err.is_instance_of::<PyAttributeError>(mask.py()) => Ok(true),
        Err(err) => Err(err),
    }
}
