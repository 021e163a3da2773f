//! The pad plan from Python's arguments: the pad groups a collator's settings give and the
//! output dtypes, checked and turned into a `core::pad::Plan` (`collate`, `collate_arrow`).

use std::collections::HashMap;

use pyo3::prelude::*;

use crate::core::error::CollateError;
use crate::core::pad::{self, DType, Follower, PadGroup, Plan, Strategy};

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
