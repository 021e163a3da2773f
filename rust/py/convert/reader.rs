//! The one reader of a batch's rows, where the rows enter first: the batch as exact dicts
//! (`exact_dicts`, taken once), and a later row's extra key refused (`check_no_later_keys`).
//! Each value a binding pads is classified once, from its
//! exact type (`classify`: an exact list, an exact tuple, an exact 1-d numpy array, a torch
//! tensor, an exact int, or anything else), and every later step dispatches on that answer
//! instead of asking the value again. Per key the reader offers two routes:
//!
//! - the **strict route** (`Values::token_lengths` / `Values::lengths` decide it once, from the
//!   classification; `Values::append_row`, `Values::write_row_from` and `Values::padded` take
//!   it): each row's values written straight into the padded output buffer, as a row writer of
//!   the one fill (`core::pad::fill_in_place`), with no column in between. It takes only values
//!   the lax route reads to the same int64 values, and gives up (None / false, no Python code
//!   run, nothing changed) on anything else;
//! - the **lax route** (`Reader::lax`): the values gathered into core columns
//!   (`gather::gather`), which reads every kind of value and names a bad one (key and row, as
//!   data: `CollateError`).
//!
//! A binding asks the strict route first and falls back to the lax one inside the same call.
//! `collate_rows` is `collate`'s strict route on top of it: whole pad groups (and int labels).

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::core::column::Column;
use crate::core::error::CollateError;
use crate::core::pad::{self, DType, Slots};

use super::array_values::{self, IntElement, IntValuesVisitor};
use super::gather::{gather, BatchKeys, KeepRaw};
use super::ints;
use super::torch;

/// What a row's value is, decided once from its exact type (a subclass is `Other`, except for
/// tensors, whose exactness the tensor readers check themselves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// An exact list of this many items (read as ints when written).
    List(usize),
    /// An exact tuple of this many items.
    Tuple(usize),
    /// An exact 1-d numpy array of this many items (read as ints when written).
    Array(usize),
    /// A `torch.Tensor` (or a subclass instance): read by `tensor_ints` or through `torch.cat`.
    Tensor,
    /// An exact Python int.
    Int,
    /// Anything else: left to the lax route.
    Other,
}

impl ValueKind {
    /// The length of an exact list or tuple, and whether it is a list.
    #[inline]
    pub fn sequence(self) -> Option<(usize, bool)> {
        match self {
            ValueKind::List(length) => Some((length, true)),
            ValueKind::Tuple(length) => Some((length, false)),
            _ => None,
        }
    }

    /// The length of an exact list, tuple or 1-d numpy array.
    #[inline]
    pub fn length(self) -> Option<usize> {
        match self {
            ValueKind::List(length) | ValueKind::Tuple(length) | ValueKind::Array(length) => {
                Some(length)
            }
            _ => None,
        }
    }
}

/// The one classification of a row's value (type checks only: no Python code runs).
#[inline]
pub fn classify(value: &Bound<'_, PyAny>) -> ValueKind {
    if let Ok(list) = value.cast_exact::<PyList>() {
        return ValueKind::List(list.len());
    }
    if let Ok(tuple) = value.cast_exact::<PyTuple>() {
        return ValueKind::Tuple(tuple.len());
    }
    if value.is_exact_instance_of::<PyInt>() {
        return ValueKind::Int;
    }
    if let Ok(array) = value.cast::<PyUntypedArray>() {
        let exact = value.get_type().is(value.py().get_type::<PyUntypedArray>());
        return if exact && array.ndim() == 1 {
            ValueKind::Array(array.len())
        } else {
            ValueKind::Other
        };
    }
    if torch::is_torch_tensor(value) {
        return ValueKind::Tensor;
    }
    ValueKind::Other
}

/// A batch as the reader holds it: the object passed, and its rows when it is an exact list or
/// tuple of exact dicts (taken once: Python code that runs later cannot add or remove a row).
pub struct Reader<'py> {
    features: Bound<'py, PyAny>,
    rows: Option<Vec<Bound<'py, PyDict>>>,
}

impl<'py> Reader<'py> {
    pub fn new(features: &Bound<'py, PyAny>) -> Self {
        let rows = exact_dicts(features);
        Reader {
            features: features.clone(),
            rows,
        }
    }

    /// The rows, when the batch is an exact list or tuple of exact dicts.
    pub fn rows(&self) -> Option<&[Bound<'py, PyDict>]> {
        self.rows.as_deref()
    }

    /// `key`'s value in every row, classified, for the strict route; None when the rows are not
    /// exact dicts or a row lacks the key.
    pub fn values(&self, key: &Bound<'py, PyString>) -> Option<Values<'py>> {
        values_of(self.rows.as_deref()?, key)
    }

    /// `key`'s value in the rows that hold it, classified (a row without it holds None, and
    /// is marked absent); None when the rows are not exact dicts.
    pub fn optional_values(&self, key: &Bound<'py, PyString>) -> Option<OptionalValues<'py>> {
        let rows = self.rows.as_deref()?;
        let py = key.py();
        let mut values = Vec::with_capacity(rows.len());
        let mut present = Vec::with_capacity(rows.len());
        for row in rows {
            let value = row.get_item(key).ok()?;
            present.push(value.is_some());
            values.push(value.unwrap_or_else(|| py.None().into_bound(py)));
        }
        Some(OptionalValues {
            values: Values::of(values),
            present,
        })
    }

    /// The lax route: `keys` gathered into core columns from the batch as passed (padded keys:
    /// a value that is not numbers is an error naming its row).
    pub fn lax(&self, keys: &[String]) -> PyResult<Vec<Column>> {
        let py = self.features.py();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let only = BatchKeys::named(py, keys.to_vec());
        let (_, gathered) = gather(&self.features, &key_refs, Some(only), KeepRaw::default())?;
        Ok(gathered.into_iter().map(|g| g.column).collect())
    }
}

/// The items of an exact list or tuple of exact dicts; None for any other batch.
pub fn exact_dicts<'py>(features: &Bound<'py, PyAny>) -> Option<Vec<Bound<'py, PyDict>>> {
    let take = |row: Bound<'py, PyAny>| row.cast_into_exact::<PyDict>().ok();
    if let Ok(list) = features.cast_exact::<PyList>() {
        let mut rows = Vec::with_capacity(list.len());
        for row in list.iter() {
            rows.push(take(row)?);
        }
        return Some(rows);
    }
    let tuple = features.cast_exact::<PyTuple>().ok()?;
    tuple.iter().map(take).collect()
}

/// The first key a later row holds that the first row lacks, as an error naming the key and the
/// row: a batch is collated under its first row's keys, so such a key would be left out. Only
/// a row with a different number of keys is looked into (a row with as many keys and one of
/// them different also lacks one of the first row's, which is reported where it is read).
/// Rows that are not a list or tuple of mappings are left to the reader, which reports them.
pub fn check_no_later_keys(features: &Bound<'_, PyAny>) -> PyResult<()> {
    let rows: Vec<Bound<'_, PyAny>> = if let Ok(list) = features.cast::<PyList>() {
        if list.len() < 2 {
            return Ok(()); // no later row
        }
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

/// `key`'s value in every row (exact dicts), classified; None when a row lacks it.
pub fn values_of<'py>(
    rows: &[Bound<'py, PyDict>],
    key: &Bound<'py, PyString>,
) -> Option<Values<'py>> {
    let mut values = Vec::with_capacity(rows.len());
    for row in rows {
        values.push(row.get_item(key).ok()??);
    }
    Some(Values::of(values))
}

/// A key some rows lack: its values (None where absent) and which rows hold it.
pub struct OptionalValues<'py> {
    pub values: Values<'py>,
    pub present: Vec<bool>,
}

impl<'py> OptionalValues<'py> {
    /// The values, each absent one taken from `other`'s same row.
    pub fn or_from(self, other: &Values<'py>) -> Values<'py> {
        let mut values = self.values;
        for (row, present) in self.present.iter().enumerate() {
            if let (false, Some(value), Some(kind)) =
                (present, other.values.get(row), other.kinds.get(row))
            {
                values.values[row] = value.clone();
                values.kinds[row] = *kind;
            }
        }
        values
    }
}

/// One key's values across the batch, each classified once.
pub struct Values<'py> {
    values: Vec<Bound<'py, PyAny>>,
    kinds: Vec<ValueKind>,
}

impl<'py> Values<'py> {
    pub fn of(values: Vec<Bound<'py, PyAny>>) -> Self {
        let kinds = values.iter().map(classify).collect();
        Values { values, kinds }
    }

    /// How many rows.
    pub fn count(&self) -> usize {
        self.values.len()
    }

    pub fn objects(&self) -> &[Bound<'py, PyAny>] {
        &self.values
    }

    /// The strict route's decision for token lists: every value an exact list or tuple (their
    /// ints checked as they are written), with these lengths; None sends the key the lax way.
    pub fn token_lengths(&self) -> Option<Vec<usize>> {
        self.kinds
            .iter()
            .map(|kind| kind.sequence().map(|(length, _)| length))
            .collect()
    }

    /// `token_lengths` over the rows `present` marks (None for the others).
    pub fn token_lengths_where(&self, present: &[bool]) -> Option<Vec<Option<usize>>> {
        self.kinds
            .iter()
            .zip(present)
            .map(|(kind, &present)| match present {
                true => kind.sequence().map(|(length, _)| Some(length)),
                false => Some(None),
            })
            .collect()
    }

    /// The strict route's decision for pad-group rows that are not tensors: every value an
    /// exact list, tuple or 1-d numpy array, with these lengths.
    pub fn lengths(&self) -> Option<Vec<usize>> {
        self.kinds.iter().map(|kind| kind.length()).collect()
    }

    /// Whether the first value is a torch tensor (the key's rows are then read as tensors).
    pub fn holds_tensors(&self) -> bool {
        self.kinds.first() == Some(&ValueKind::Tensor)
    }

    /// The strict route's row writer: appends row `row`'s `length` values to `out` (a list's or
    /// tuple's exact ints in the int64 range, or a 1-d integer numpy array's values); false
    /// for anything else (`out` then unchanged).
    #[inline]
    pub fn append_row(&self, row: usize, out: &mut Slots<'_, i64>, length: usize) -> bool {
        let (Some(value), Some(kind)) = (self.values.get(row), self.kinds.get(row)) else {
            return false;
        };
        match *kind {
            ValueKind::List(_) => ints::append_exact_ints(value, true, out, length),
            ValueKind::Tuple(_) => ints::append_exact_ints(value, false, out, length),
            ValueKind::Array(_) => match value.cast::<PyUntypedArray>() {
                Ok(array) => array_values::with_int_values(array, AppendFirst { length, out })
                    .unwrap_or(false),
                Err(_) => false,
            },
            _ => false,
        }
    }

    /// Writes `place.len()` items of row `row`'s exact list or tuple from item `start` on into
    /// `place`, when every one is an exact int in the int64 range (a row writer of the joined
    /// fills, `core::preference`).
    #[inline]
    pub fn write_row_from(
        &self,
        row: usize,
        start: usize,
        place: &mut [std::mem::MaybeUninit<i64>],
    ) -> bool {
        match (
            self.values.get(row),
            self.kinds.get(row).and_then(|k| k.sequence()),
        ) {
            (Some(value), Some((_, is_list))) => {
                ints::write_exact_ints_from(value, is_list, start, place, false)
            }
            _ => false,
        }
    }

    /// The strict route into a padded `rows × target` int64 buffer (`pad` in the other slots,
    /// on the left when `left`): None when a row cannot be written (see `append_row`); an error
    /// only from the fill (a size past memory, a row longer than `target`).
    pub fn padded(
        &self,
        key: &str,
        lengths: &[usize],
        target: usize,
        pad: i64,
        left: bool,
    ) -> crate::core::error::Result<Option<Vec<i64>>> {
        pad::fill_in_place(key, lengths, target, pad, left, |row, out| {
            lengths
                .get(row)
                .is_some_and(|&length| self.append_row(row, out, length))
        })
    }

    /// The strict route into one unpadded buffer: every row's values end to end (`lengths`
    /// as `token_lengths` gave them), sized once; None when a row cannot be written.
    pub fn concatenated(&self, lengths: &[usize]) -> Option<Vec<i64>> {
        let total = lengths
            .iter()
            .try_fold(0usize, |total, &length| total.checked_add(length))?;
        let mut values = Vec::new();
        values.try_reserve_exact(total).ok()?;
        for (row, &length) in lengths.iter().enumerate() {
            let appended = pad::append_to_vec(&mut values, length, |slots| {
                self.append_row(row, slots, length)
            });
            if !appended {
                return None;
            }
        }
        Some(values)
    }
}

/// Appends the first `length` values to `out` (written once: no zero fill first).
pub struct AppendFirst<'a, 'b> {
    pub length: usize,
    pub out: &'a mut Slots<'b, i64>,
}

impl IntValuesVisitor for AppendFirst<'_, '_> {
    type Output = bool;
    fn visit<T: IntElement>(self, values: &[T]) -> bool {
        array_values::append_ints(values, 0, self.length, self.out)
    }
}

/// One number per row: a column of scalars (the preference collators' `margin`, `label`, the
/// reference log-probabilities), as `Values::scalars` reads it.
pub enum Scalars {
    F32(Vec<f32>),
    Bool(Vec<bool>),
}

impl<'py> Values<'py> {
    /// The first row whose value is neither a list nor a tuple (subclasses count as either),
    /// with that value: what a key of token lists must not hold on the lax route either.
    pub fn first_not_a_sequence(&self) -> Option<(usize, &Bound<'py, PyAny>)> {
        self.values.iter().enumerate().find(|(_, value)| {
            !(value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>())
        })
    }

    /// Every value as one number of `dtype`: each an exact float for `DType::F32` (rounded to
    /// the nearest float32, infinite past its range, as `torch.tensor` rounds), each an exact
    /// bool for `DType::Bool`; None when a value is not (the caller's lax route then names it),
    /// for another dtype, or when the column cannot be reserved. No Python code runs.
    pub fn scalars(&self, dtype: DType) -> Option<Scalars> {
        match dtype {
            DType::F32 => {
                let mut floats = Vec::new();
                floats.try_reserve_exact(self.values.len()).ok()?;
                for value in &self.values {
                    floats.push(value.cast_exact::<PyFloat>().ok()?.value() as f32);
                }
                Some(Scalars::F32(floats))
            }
            DType::Bool => {
                let mut bools = Vec::new();
                bools.try_reserve_exact(self.values.len()).ok()?;
                for value in &self.values {
                    bools.push(value.cast_exact::<PyBool>().ok()?.is_true());
                }
                Some(Scalars::Bool(bools))
            }
            DType::I64 | DType::F64 => None,
        }
    }
}
