//! `collate`'s strict route: pad groups written straight into their outputs: each row's values go from the Python row
//! (a list or tuple of ints, a 1-d integer numpy array, or a slice of the key's concatenated
//! torch tensors) into the row's place in the padded int64 buffer, with no column in between.
//!
//! This is a shortcut for the usual batch, not a second implementation of padding: it takes
//! only rows that the general path (gather, then `core::pad::collate`) pads to int64 without
//! an error, and gives up on anything else (a missing key, a float, a bool, a length that does
//! not match, a dict subclass, ...), leaving the whole group to the general path, which then
//! reads it again and reports what is wrong, in row order. Giving up runs no Python code and
//! changes nothing, so the result is the general path's either way.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyString};

use crate::core::pad::{self, Data, Layout, Output, PadGroup, Plan, Slots, Strategy};
use crate::core::sizes;

use super::array_values::{self, IntElement, IntValuesVisitor};
use super::dlpack;
use super::gather::BatchKeys;
use super::reader::{classify, values_of, AppendFirst, ValueKind, Values};
use super::tensor_concat::{concatenate_tensors, ConcatenatedRows};
use super::tensor_ints::{self, TensorInts};
use super::torch;

/// What `strict_groups` did: the keys being collated, the rows it read, the outputs of the
/// groups it padded (and of the int labels), and the groups left for the core.
pub struct StrictGroups<'py> {
    pub keys: BatchKeys<'py>,
    pub rows: Vec<Bound<'py, PyDict>>,
    pub outputs: Vec<Output>,
    pub rest_groups: Vec<PadGroup>,
}

/// Pads the groups it can straight from `rows` (a list or tuple of exact dicts, as
/// `reader::exact_dicts` takes it), and the int labels outside every group. `None`: the strict
/// route took no group (other rows, or no group qualified), and the whole batch goes the
/// general way.
pub fn strict_groups<'py>(
    rows: Vec<Bound<'py, PyDict>>,
    plan: &Plan,
    padded_keys: &[&str],
    only_keys: &Option<BatchKeys<'py>>,
    keep_arrays: bool,
) -> PyResult<Option<StrictGroups<'py>>> {
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
    let mut outputs = Vec::with_capacity(keys.names.len() + plan.groups.len());
    let mut rest_groups = Vec::new();
    for group in &plan.groups {
        match pad_group(&rows, &keys.names, &keys.objects, group, plan) {
            Some(group_outputs) => outputs.extend(group_outputs),
            None => rest_groups.push(group.clone()),
        }
    }
    if outputs.is_empty() {
        return Ok(None);
    }
    // Keys outside every group holding an int per row (labels: Python ints, or 0-d tensors),
    // read straight from the rows too.
    for (name, object) in keys.names.iter().zip(&keys.objects) {
        if padded_keys.contains(&name.as_str()) {
            continue;
        }
        if let Some(output) = int_scalars(&rows, object, name, plan, keep_arrays) {
            outputs.push(output);
        }
    }
    Ok(Some(StrictGroups {
        keys,
        rows,
        outputs,
        rest_groups,
    }))
}

/// One key's values across the batch, as they will be read.
enum KeyRows<'py> {
    /// One value per row: exact lists or tuples, or exact 1-d numpy arrays.
    Values(Values<'py>),
    /// Every row a 1-d tensor of one dtype, laid end to end by one `torch.cat`.
    Concatenated(ConcatenatedRows<'py>),
    /// Every row a 1-d integer tensor, read in place (see `members_rows`).
    Tensors(Vec<TensorInts<'py>>),
}

/// A member of a pad group as found in the rows: its values, lengths and pad value.
struct Member<'a, 'py> {
    key: &'a str,
    rows: KeyRows<'py>,
    lengths: Vec<usize>,
    pad_value: i64,
}

/// The group members' values as they will be read: when every member holds 1-d integer
/// tensors, each read in place (where torch has the DLPack exchange table, or they are a few:
/// `tensor_ints::READ_IN_PLACE_UP_TO`);
/// else all of them through one `torch.cat` (one call into torch instead of one per key),
/// else each member's through its own; other values as they are. None when some member's
/// tensors cannot be concatenated.
fn members_rows<'py>(members: Vec<Values<'py>>) -> Option<Vec<KeyRows<'py>>> {
    let all_tensors = members.iter().all(Values::holds_tensors);
    let count: usize = members.iter().map(Values::count).sum();
    let in_place = |value: &Bound<'py, PyAny>| {
        count <= tensor_ints::READ_IN_PLACE_UP_TO || dlpack::describes_tensors(value.py())
    };
    if all_tensors
        && members
            .first()
            .and_then(|v| v.objects().first())
            .is_some_and(in_place)
    {
        // Every Python-level answer first (each tensor exact, none negated), then every
        // view, read later with no Python code run in between: nothing can move a storage
        // between its view and its read (the members hold the tensors meanwhile).
        let readable = members
            .iter()
            .all(|values| values.objects().iter().all(tensor_ints::readable_in_place));
        let read: Option<Vec<KeyRows<'py>>> = readable.then_some(()).and_then(|()| {
            members
                .iter()
                .map(|values| {
                    values
                        .objects()
                        .iter()
                        .map(|tensor| tensor_ints::int_values(tensor, 1))
                        .collect::<Option<Vec<_>>>()
                        .map(KeyRows::Tensors)
                })
                .collect()
        });
        if read.is_some() {
            return read;
        }
    }
    if members.len() > 1 && all_tensors {
        let keys: Vec<&[Bound<'py, PyAny>]> = members.iter().map(Values::objects).collect();
        if let Some(concatenated) = concatenate_tensors(&keys) {
            return Some(
                concatenated
                    .into_iter()
                    .map(KeyRows::Concatenated)
                    .collect(),
            );
        }
    }
    members
        .into_iter()
        .map(|values| {
            if values.holds_tensors() {
                concatenate_tensors(&[values.objects()])
                    .and_then(|mut keys| keys.pop())
                    .map(KeyRows::Concatenated)
            } else {
                Some(KeyRows::Values(values))
            }
        })
        .collect()
}

fn lengths_of(rows: &KeyRows<'_>) -> Option<Vec<usize>> {
    match rows {
        KeyRows::Values(values) => values.lengths(),
        KeyRows::Concatenated(concatenated) => Some(concatenated.lengths.clone()),
        KeyRows::Tensors(tensors) => Some(tensors.iter().map(TensorInts::len).collect()),
    }
}

/// Fills a fresh padded buffer from concatenated rows, each row's values a slice of `values`.
struct FillFromConcatenated<'a> {
    key: &'a str,
    /// Where the key's values start in the concatenation.
    offset: usize,
    lengths: &'a [usize],
    target: usize,
    pad_value: i64,
    left: bool,
}

impl IntValuesVisitor for FillFromConcatenated<'_> {
    type Output = Option<Data>;
    fn visit<T: IntElement>(self, values: &[T]) -> Option<Data> {
        let mut start = self.offset;
        let filled = pad::fill_in_place(
            self.key,
            self.lengths,
            self.target,
            self.pad_value,
            self.left,
            |row, out| {
                let length = self.lengths[row];
                let written = array_values::append_ints(values, start, length, out);
                start = start.saturating_add(length);
                written
            },
        );
        filled.ok().flatten().map(Data::I64)
    }
}

/// `member` padded to `target`, each row's values appended by `append(row, out)`.
fn fill_rows(
    member: &Member<'_, '_>,
    target: usize,
    left: bool,
    append: impl FnMut(usize, &mut Slots<'_, i64>) -> bool,
) -> Option<Data> {
    pad::fill_in_place(
        member.key,
        &member.lengths,
        target,
        member.pad_value,
        left,
        append,
    )
    .ok()
    .flatten()
    .map(Data::I64)
}

fn fill_member(member: &Member<'_, '_>, target: usize, left: bool) -> Option<Data> {
    let length = |row: usize| member.lengths[row];
    match &member.rows {
        KeyRows::Values(values) => fill_rows(member, target, left, |row, out| {
            values.append_row(row, out, length(row))
        }),
        KeyRows::Tensors(tensors) => fill_rows(member, target, left, |row, out| {
            tensors.get(row).is_some_and(|tensor| {
                tensor.visit(AppendFirst {
                    length: length(row),
                    out,
                })
            })
        }),
        KeyRows::Concatenated(concatenated) => array_values::with_int_values(
            &concatenated.array,
            FillFromConcatenated {
                key: member.key,
                offset: concatenated.offset,
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
    let mut found = Vec::with_capacity(wanted.len());
    let mut values = Vec::with_capacity(wanted.len());
    for (index, (key, pad_value, same_length)) in wanted.into_iter().enumerate() {
        let Some(position) = find(key) else {
            if index == 0 {
                return None; // no lead: the general path names it
            }
            continue;
        };
        found.push((&keys[position], pad_value, same_length));
        values.push(values_of(rows, &py_keys[position])?);
    }
    let mut members: Vec<(Member<'a, 'py>, bool)> = Vec::with_capacity(found.len());
    for ((key, pad_value, same_length), member_rows) in found.into_iter().zip(members_rows(values)?)
    {
        let lengths = lengths_of(&member_rows)?;
        // A key without a single value has no element type yet: left to the general path.
        if lengths.iter().all(|&length| length == 0) {
            return None;
        }
        members.push((
            Member {
                key,
                rows: member_rows,
                lengths,
                pad_value,
            },
            same_length,
        ));
    }
    let lead_lengths = &members.first()?.0.lengths;
    let target = match pad::target_length(
        &group.lead,
        lead_lengths,
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
            member.lengths == *lead_lengths
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
    let mask_key = mask.filter(|key| find(key).is_none());
    // The group's buffers together within the machine's memory (each is alone, through
    // `target_length`); a group that is not gives up, and the general path raises.
    let bytes = rows.len().saturating_mul(target).saturating_mul(8);
    let group_bytes: Vec<(&str, usize)> = members
        .iter()
        .map(|(member, _)| (member.key, bytes))
        .chain(mask_key.map(|key| (key, bytes)))
        .collect();
    sizes::check_batch(&group_bytes).ok()?;
    let mut outputs = Vec::with_capacity(members.len() + 1);
    for (member, _) in &members {
        outputs.push(Output {
            key: member.key.to_owned(),
            data: fill_member(member, target, group.left)?,
            layout: layout.clone(),
        });
    }
    if let Some(mask_key) = mask_key {
        let ones = pad::fill_in_place(mask_key, lead_lengths, target, 0, group.left, |row, out| {
            out.resize(out.len() + lead_lengths[row], 1);
            true
        })
        .ok()??;
        outputs.push(Output {
            key: mask_key.to_owned(),
            data: Data::I64(ones),
            layout,
        });
    }
    Some(outputs)
}

/// A 0-d tensor's one value as int64 (None past the int64 range, as `tolist()`'s int would
/// be).
struct OnlyValue;

impl IntValuesVisitor for OnlyValue {
    type Output = Option<i64>;
    fn visit<T: IntElement>(self, values: &[T]) -> Option<i64> {
        values.first()?.to_i64()
    }
}

/// A key outside the pad groups holding a number per row that reads as a Python `int` within
/// the int64 range (a classification label): its int64 column, read straight from the rows.
/// Either every row holds an exact `int`, or (unless `keep_arrays`, which leaves tensors to
/// the caller) every row an exact 0-d torch tensor whose `tolist()` is such an int, as
/// `read::read_tensor_scalars` reads them. None for anything else (a bool, a float, a numpy
/// value, a larger int, a row without the key, a mix): the general path then reads the key
/// and reports what is wrong, as it would have. What it gives for such a key is this: one
/// int64 value per row.
pub fn int_scalars(
    rows: &[Bound<'_, PyDict>],
    key: &Bound<'_, PyString>,
    name: &str,
    plan: &Plan,
    keep_arrays: bool,
) -> Option<Output> {
    if plan.dtypes.contains_key(name) {
        return None;
    }
    let first = rows.first()?.get_item(key).ok()??;
    let py = first.py();
    let tensor_type = if classify(&first) == ValueKind::Int {
        None
    } else {
        let tensor_type = torch::torch_tensor_type(py).filter(|_| !keep_arrays)?;
        if !first.get_type().is(tensor_type) {
            return None;
        }
        let dim = first.call_method0(intern!(py, "dim")).ok()?;
        if dim.extract::<usize>().ok()? != 0 {
            return None;
        }
        Some(tensor_type)
    };
    let mut values = Vec::new();
    values.try_reserve_exact(rows.len()).ok()?;
    for row in rows {
        let value = row.get_item(key).ok()??;
        let number = match tensor_type {
            None => value,
            Some(tensor_type) => {
                if !value.get_type().is(tensor_type) {
                    return None;
                }
                // Read in place where it can be (an integer CPU tensor), else its `tolist()`.
                // (Its view is read at once, before the next row's Python-level answer.)
                if tensor_ints::readable_in_place(&value) {
                    if let Some(ints) = tensor_ints::int_values(&value, 0) {
                        values.push(ints.visit(OnlyValue)?);
                        continue;
                    }
                }
                value.call_method0(intern!(py, "tolist")).ok()?
            }
        };
        let int = number.cast_exact::<PyInt>().ok()?;
        values.push(int.extract::<i64>().ok()?);
    }
    Some(Output {
        key: name.to_owned(),
        data: Data::I64(values),
        layout: Layout::Scalar { rows: rows.len() },
    })
}
