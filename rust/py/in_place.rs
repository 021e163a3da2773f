//! Pad groups written straight into their outputs: each row's values go from the Python row
//! (a list or tuple of ints, a 1-d integer numpy array, or a slice of the key's concatenated
//! torch tensors) into the row's place in the padded int64 buffer, with no column in between.
//!
//! This is a shortcut for the usual batch, not a second implementation of padding: it takes
//! only rows that the general path (gather, then `core::pad::collate`) pads to int64 without
//! an error, and gives up on anything else (a missing key, a float, a bool, a length that does
//! not match, a dict subclass, ...), leaving the whole group to the general path, which then
//! reads it again and reports what is wrong, in row order. Giving up runs no Python code and
//! changes nothing, so the result is the general path's either way.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::core::pad::{self, Data, Layout, Output, PadGroup, Plan, Strategy};

use super::read::{self, ConcatenatedRows, IntElement, IntValuesVisitor};

/// One key's values across the batch, as they will be read.
enum KeyRows<'py> {
    /// One value per row: exact lists or tuples, or exact 1-d numpy arrays.
    Values(Vec<Bound<'py, PyAny>>),
    /// Every row a 1-d tensor of one dtype, laid end to end by one `torch.cat`.
    Concatenated(ConcatenatedRows<'py>),
}

/// A member of a pad group as found in the rows: its values, lengths and pad value.
struct Member<'a, 'py> {
    key: &'a str,
    rows: KeyRows<'py>,
    lengths: Vec<usize>,
    pad_value: i64,
}

/// The length of a value this module reads, or None when it does not read it.
fn value_length(value: &Bound<'_, PyAny>) -> Option<usize> {
    if let Ok(list) = value.cast_exact::<PyList>() {
        return Some(list.len());
    }
    if let Ok(tuple) = value.cast_exact::<PyTuple>() {
        return Some(tuple.len());
    }
    let array = value.cast::<PyUntypedArray>().ok()?;
    let exact = value.get_type().is(value.py().get_type::<PyUntypedArray>());
    (exact && array.ndim() == 1).then(|| array.len())
}

/// `key`'s values in every row (all exact dicts), readable here; None otherwise.
fn member_rows<'py>(
    rows: &[Bound<'py, PyDict>],
    key: &Bound<'py, PyString>,
) -> Option<KeyRows<'py>> {
    let values: Vec<Bound<'py, PyAny>> = rows
        .iter()
        .map(|row| row.get_item(key).ok().flatten())
        .collect::<Option<_>>()?;
    if values.first().is_some_and(read::is_torch_tensor) {
        return read::concatenate_tensors(&values)
            .ok()?
            .map(KeyRows::Concatenated);
    }
    Some(KeyRows::Values(values))
}

fn lengths_of(rows: &KeyRows<'_>) -> Option<Vec<usize>> {
    match rows {
        KeyRows::Values(values) => values.iter().map(value_length).collect(),
        KeyRows::Concatenated(concatenated) => Some(concatenated.lengths.clone()),
    }
}

/// Writes one row's value into its place.
fn write_value(value: &Bound<'_, PyAny>, place: &mut [i64]) -> bool {
    if value.is_exact_instance_of::<PyList>() {
        return read::write_exact_ints(value, true, place);
    }
    if value.is_exact_instance_of::<PyTuple>() {
        return read::write_exact_ints(value, false, place);
    }
    let Ok(array) = value.cast::<PyUntypedArray>() else {
        return false;
    };
    read::with_int_values(array, WriteFrom { start: 0, place }).unwrap_or(false)
}

/// Copies `place.len()` values from `start` into `place`.
struct WriteFrom<'a> {
    start: usize,
    place: &'a mut [i64],
}

impl IntValuesVisitor for WriteFrom<'_> {
    type Output = bool;
    fn visit<T: IntElement>(self, values: &[T]) -> bool {
        read::write_ints(values, self.start, self.place)
    }
}

/// Fills a padded buffer from concatenated rows, each row's values a slice of `values`.
struct FillFromConcatenated<'a> {
    key: &'a str,
    lengths: &'a [usize],
    target: usize,
    pad_value: i64,
    left: bool,
}

impl IntValuesVisitor for FillFromConcatenated<'_> {
    type Output = Option<Vec<i64>>;
    fn visit<T: IntElement>(self, values: &[T]) -> Option<Vec<i64>> {
        let mut start = 0usize;
        let filled = pad::fill_in_place(
            self.key,
            self.lengths,
            self.target,
            self.pad_value,
            self.left,
            |_, place| {
                let written = read::write_ints(values, start, place);
                start = start.saturating_add(place.len());
                written
            },
        );
        filled.ok().flatten()
    }
}

fn fill_member(member: &Member<'_, '_>, target: usize, left: bool) -> Option<Vec<i64>> {
    match &member.rows {
        KeyRows::Values(values) => pad::fill_in_place(
            member.key,
            &member.lengths,
            target,
            member.pad_value,
            left,
            |row, place| {
                values
                    .get(row)
                    .is_some_and(|value| write_value(value, place))
            },
        )
        .ok()
        .flatten(),
        KeyRows::Concatenated(concatenated) => read::with_int_values(
            &concatenated.array,
            FillFromConcatenated {
                key: member.key,
                lengths: &member.lengths,
                target,
                pad_value: member.pad_value,
                left,
            },
        )
        .flatten(),
    }
}

/// Pads `group` straight from the rows when it can (see the module's note): its outputs, in
/// no particular order, or None to leave the group to the general path. `keys` are the keys
/// being collated (a key of the group outside them is not padded, as in the general path).
pub fn pad_group<'a, 'py>(
    rows: &[Bound<'py, PyDict>],
    keys: &'a [String],
    py_keys: &[Bound<'py, PyString>],
    group: &'a PadGroup,
    plan: &Plan,
) -> Option<Vec<Output>> {
    let find = |key: &str| keys.iter().position(|k| k == key);
    let wanted = group.members();
    let mask = group.attention_mask.as_deref();
    if wanted
        .iter()
        .any(|(key, ..)| plan.dtypes.contains_key(*key))
    {
        return None;
    }
    let mut members: Vec<(Member<'a, 'py>, bool)> = Vec::with_capacity(wanted.len());
    for (index, (key, pad_value, same_length)) in wanted.into_iter().enumerate() {
        let Some(position) = find(key) else {
            if index == 0 {
                return None; // no lead: the general path names it
            }
            continue;
        };
        let member_rows = member_rows(rows, &py_keys[position])?;
        let lengths = lengths_of(&member_rows)?;
        // A key without a single value has no element type yet: left to the general path.
        if lengths.iter().all(|&length| length == 0) {
            return None;
        }
        members.push((
            Member {
                key: &keys[position],
                rows: member_rows,
                lengths,
                pad_value,
            },
            same_length,
        ));
    }
    let lead_lengths = members.first()?.0.lengths.clone();
    let target = match pad::target_length(
        &group.lead,
        &lead_lengths,
        group.strategy,
        group.pad_to_multiple_of,
    )
    .ok()?
    {
        Some(target) => target,
        None => {
            // do_not_pad: one length in every row, or the general path's ragged handling.
            let first = *lead_lengths.first()?;
            if group.strategy != Strategy::DoNotPad || lead_lengths.iter().any(|&l| l != first) {
                return None;
            }
            first
        }
    };
    for (member, same_length) in &members {
        let fits = if *same_length {
            member.lengths == lead_lengths
        } else {
            member.lengths.iter().all(|&length| length <= target)
        };
        if !fits {
            return None;
        }
    }
    let layout = Layout::Matrix {
        rows: rows.len(),
        columns: target,
    };
    let mut outputs = Vec::with_capacity(members.len() + 1);
    for (member, _) in &members {
        outputs.push(Output {
            key: member.key.to_owned(),
            data: Data::I64(fill_member(member, target, group.left)?),
            layout: layout.clone(),
        });
    }
    if let Some(mask_key) = mask.filter(|key| find(key).is_none()) {
        let ones = pad::fill_in_place(
            mask_key,
            &lead_lengths,
            target,
            0,
            group.left,
            |_, place| {
                place.fill(1);
                true
            },
        )
        .ok()??;
        outputs.push(Output {
            key: mask_key.to_owned(),
            data: Data::I64(ones),
            layout,
        });
    }
    Some(outputs)
}
