//! The pad plan and outputs across the boundary: a `core::pad::Plan` from the arguments
//! `collate` and `collate_arrow` take, and the core's outputs handed to numpy without a copy.

use std::collections::HashMap;

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::core::error::CollateError;
use crate::core::pad::{self, DType, Data, Follower, Layout, Output, PadGroup, Plan, Strategy};

/// A pad group as Python passes it: (lead, lead_pad_value, strategy, max_length,
/// pad_to_multiple_of, left, [(follower, pad_value, same_length_as_lead)], attention_mask_key).
pub type GroupArgs = (
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

/// The core's plan from the arguments both `collate` and `collate_arrow` take.
pub fn build_plan(
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

pub fn output_to_py<'py>(py: Python<'py>, output: Output) -> PyResult<Bound<'py, PyAny>> {
    match output.data {
        Data::Bool(v) => array(py, v, &output.layout),
        Data::I64(v) => array(py, v, &output.layout),
        Data::F32(v) => array(py, v, &output.layout),
        Data::F64(v) => array(py, v, &output.layout),
    }
}
