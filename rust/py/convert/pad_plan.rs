//! The pad plan from Python's arguments: `_native.PadGroup` (a pad group by name, checked once
//! when a collator's settings are worked out) and the output dtypes, turned into a
//! `core::pad::Plan` for `collate`, `PyCollatePlan` and `collate_arrow`.

use std::collections::HashMap;

use pyo3::prelude::*;

use crate::core::pad::{self, DType, Follower, PadGroup, Plan, Strategy};

/// A pad group, named and checked once where a collator's settings are worked out (Python's
/// `_native.PadGroup`): the lead key, whose lengths set the target, its pad value, how far it
/// is padded, the keys padded beside it and the attention mask made for it. `collate` and
/// `collate_arrow` take a list of these and only read them.
#[pyclass(frozen, name = "PadGroup", module = "fastcollate._native")]
pub struct PyPadGroup {
    group: PadGroup,
}

impl PyPadGroup {
    /// The core's group this stands for.
    pub fn group(&self) -> &PadGroup {
        &self.group
    }
}

fn strategy_name(strategy: Strategy) -> (&'static str, Option<usize>) {
    match strategy {
        Strategy::Longest => ("longest", None),
        Strategy::MaxLength(n) => ("max_length", Some(n)),
        Strategy::DoNotPad => ("do_not_pad", None),
    }
}

#[pymethods]
impl PyPadGroup {
    /// `strategy` is transformers' name ("longest", "max_length" with `max_length`, or
    /// "do_not_pad"); each follower is (key, pad value, whether each row must be exactly as
    /// long as the lead's); `attention_mask` is created (ones over each lead row) when absent.
    #[new]
    #[pyo3(signature = (
        lead, *, pad_value, strategy="longest", max_length=None, pad_to_multiple_of=None,
        left=false, followers=Vec::new(), attention_mask=None, integer_lead=false,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        lead: String,
        pad_value: i64,
        strategy: &str,
        max_length: Option<usize>,
        pad_to_multiple_of: Option<usize>,
        left: bool,
        followers: Vec<(String, i64, bool)>,
        attention_mask: Option<String>,
        integer_lead: bool,
    ) -> PyResult<Self> {
        pad::round_up(0, pad_to_multiple_of)?;
        let group = PadGroup {
            lead,
            lead_pad_value: pad_value,
            strategy: Strategy::parse(strategy, max_length)?,
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
            attention_mask,
            integer_lead,
        };
        Ok(PyPadGroup { group })
    }

    /// The same group with one more follower padded beside the lead.
    fn with_follower(&self, key: String, pad_value: i64, same_length_as_lead: bool) -> Self {
        let mut group = self.group.clone();
        group.followers.push(Follower {
            key,
            pad_value,
            same_length_as_lead,
        });
        PyPadGroup { group }
    }

    #[getter]
    fn lead(&self) -> &str {
        &self.group.lead
    }

    #[getter]
    fn pad_value(&self) -> i64 {
        self.group.lead_pad_value
    }

    #[getter]
    fn strategy(&self) -> &'static str {
        strategy_name(self.group.strategy).0
    }

    #[getter]
    fn max_length(&self) -> Option<usize> {
        strategy_name(self.group.strategy).1
    }

    #[getter]
    fn pad_to_multiple_of(&self) -> Option<usize> {
        self.group.pad_to_multiple_of
    }

    #[getter]
    fn left(&self) -> bool {
        self.group.left
    }

    #[getter]
    fn followers(&self) -> Vec<(String, i64, bool)> {
        self.group
            .followers
            .iter()
            .map(|f| (f.key.clone(), f.pad_value, f.same_length_as_lead))
            .collect()
    }

    #[getter]
    fn attention_mask(&self) -> Option<&str> {
        self.group.attention_mask.as_deref()
    }

    #[getter]
    fn integer_lead(&self) -> bool {
        self.group.integer_lead
    }

    /// Pickled by its constructor's arguments.
    fn __getnewargs_ex__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<((String,), Bound<'py, pyo3::types::PyDict>)> {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("pad_value", self.pad_value())?;
        kwargs.set_item("strategy", self.strategy())?;
        kwargs.set_item("max_length", self.max_length())?;
        kwargs.set_item("pad_to_multiple_of", self.pad_to_multiple_of())?;
        kwargs.set_item("left", self.left())?;
        kwargs.set_item("followers", self.followers())?;
        kwargs.set_item("attention_mask", self.attention_mask())?;
        kwargs.set_item("integer_lead", self.integer_lead())?;
        Ok(((self.group.lead.clone(),), kwargs))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let ((lead,), kwargs) = self.__getnewargs_ex__(py)?;
        let mut parts = vec![lead.into_pyobject(py)?.repr()?.to_string()];
        for (name, value) in kwargs.iter() {
            parts.push(format!("{name}={}", value.repr()?));
        }
        Ok(format!("PadGroup({})", parts.join(", ")))
    }
}

/// A dtype as the bindings take it: numpy's name for it (see `DType::named`), parsed once at
/// the boundary.
impl<'a, 'py> FromPyObject<'a, 'py> for DType {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let name = obj.cast::<pyo3::types::PyString>()?;
        Ok(DType::named(name.to_str()?)?)
    }
}

/// The core's plan from the arguments both `collate` and `collate_arrow` take.
pub fn build_plan<D>(
    groups: Vec<Bound<'_, PyPadGroup>>,
    float32: bool,
    allow_ragged: bool,
    dtypes: Option<HashMap<String, D>>,
) -> PyResult<Plan>
where
    D: TryInto<DType>,
    PyErr: From<D::Error>,
{
    let groups = groups.iter().map(|g| g.get().group().clone()).collect();
    let dtypes = dtypes
        .unwrap_or_default()
        .into_iter()
        .map(|(key, dtype)| Ok((key, dtype.try_into()?)))
        .collect::<PyResult<HashMap<_, _>>>()?;
    Ok(Plan {
        groups,
        float_dtype: if float32 { DType::F32 } else { DType::F64 },
        allow_ragged,
        dtypes,
    })
}
