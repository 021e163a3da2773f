//! Padding and stacking: turns gathered columns into one buffer per output key.
//!
//! Everything here runs with the interpreter released. A batch is described by a [`Plan`]: pad
//! groups (a lead key whose lengths set the target, plus keys padded alongside it) and the
//! options that decide dtypes. Keys in no group are stacked as they are.

use std::collections::HashMap;
use std::mem::MaybeUninit;

use crate::core::column::{Column, Kind, Shape};
use crate::core::error::{CollateError, Result};
use crate::core::sizes;

/// How far a pad group is padded (transformers' `PaddingStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// To the longest lead sequence in the batch.
    Longest,
    /// To this many positions; a longer sequence is an error (padding never truncates).
    MaxLength(usize),
    /// No padding: sequences are stacked as they are.
    DoNotPad,
}

impl Strategy {
    /// Parses transformers' names for the strategies ("longest", "max_length", "do_not_pad").
    pub fn parse(name: &str, max_length: Option<usize>) -> Result<Strategy> {
        match name {
            "longest" => Ok(Strategy::Longest),
            "do_not_pad" => Ok(Strategy::DoNotPad),
            "max_length" => match max_length {
                Some(n) => Ok(Strategy::MaxLength(n)),
                None => Err(CollateError::InvalidOption(
                    "padding='max_length' needs a max_length".into(),
                )),
            },
            other => Err(CollateError::InvalidOption(format!(
                "'{other}' is not a valid padding strategy; use True/'longest', 'max_length' or \
                 False/'do_not_pad'"
            ))),
        }
    }
}

/// A key padded alongside a group's lead key.
#[derive(Debug, Clone, PartialEq)]
pub struct Follower {
    pub key: String,
    pub pad_value: i64,
    /// True: each row must be exactly as long as the lead's row (token_type_ids, masks).
    /// False: padded to the group's target on its own (token-classification labels).
    pub same_length_as_lead: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PadGroup {
    pub lead: String,
    pub lead_pad_value: i64,
    pub strategy: Strategy,
    pub pad_to_multiple_of: Option<usize>,
    pub left: bool,
    pub followers: Vec<Follower>,
    /// Attention-mask key: created (ones over each lead row) when absent, padded with 0.
    pub attention_mask: Option<String>,
    /// True: the lead holds token ids, and a float read as a Python value among them (see
    /// `Column::first_python_float_row`) is an error naming its row. Float arrays and tensors
    /// pad as they are, as transformers pads them.
    pub integer_lead: bool,
}

impl PadGroup {
    /// Every key the group pads, in order (lead, followers, attention mask), with its pad value
    /// and whether each row must be exactly as long as the lead's.
    pub fn members(&self) -> Vec<(&str, i64, bool)> {
        let mut members = Vec::with_capacity(self.followers.len() + 2);
        members.push((self.lead.as_str(), self.lead_pad_value, true));
        members.extend(
            self.followers
                .iter()
                .map(|f| (f.key.as_str(), f.pad_value, f.same_length_as_lead)),
        );
        members.extend(self.attention_mask.as_deref().map(|key| (key, 0, true)));
        members
    }
}

/// The dtype of an output buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    Bool,
    I64,
    F32,
    F64,
}

impl TryFrom<String> for DType {
    type Error = CollateError;

    fn try_from(name: String) -> Result<DType> {
        DType::named(&name)
    }
}

impl DType {
    /// The dtype numpy calls `name` ("bool", "int64", "float32", "float64"), as the binding
    /// layer receives it; any other name is an `InvalidOption`.
    pub fn named(name: &str) -> Result<DType> {
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

    /// numpy's name for the dtype (`named`'s inverse).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I64 => "int64",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// The bytes of one element.
    pub fn item_size(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub groups: Vec<PadGroup>,
    /// dtype for float columns: F32 as `torch.tensor` makes them, F64 as `np.asarray` does.
    pub float_dtype: DType,
    /// Keep rows of different lengths as a ragged output instead of failing
    /// (return_tensors=None gives Python lists, which may be ragged).
    pub allow_ragged: bool,
    /// Per-key dtype overrides (default_data_collator's label dtype comes from the first row).
    pub dtypes: HashMap<String, DType>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    Bool(Vec<bool>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// One value per row: shape (rows,).
    Scalar { rows: usize },
    /// shape (rows, columns).
    Matrix { rows: usize, columns: usize },
    /// Rows of different lengths: `offsets[r]..offsets[r + 1]`.
    Ragged { offsets: Vec<usize> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub key: String,
    pub data: Data,
    pub layout: Layout,
}

/// Rounds `length` up to the next multiple of `multiple` (transformers' pad_to_multiple_of).
pub fn round_up(length: usize, multiple: Option<usize>) -> Result<usize> {
    match multiple {
        None => Ok(length),
        Some(0) => Err(CollateError::InvalidOption(
            "pad_to_multiple_of must be a positive integer, not 0".into(),
        )),
        Some(m) => length.checked_next_multiple_of(m).ok_or_else(|| {
            CollateError::InvalidOption(format!(
                "pad_to_multiple_of={m} rounds a length of {length} past the largest possible \
                 size"
            ))
        }),
    }
}

/// The number of values of a `rows × length` output of `T`, checked by the one sizing rule
/// (`core::sizes`): an output past the address space or past this machine's memory is an
/// error naming the key, the shape and the bytes.
pub fn output_size<T>(key: &str, rows: usize, length: usize) -> Result<usize> {
    sizes::output_elements::<T>(key, &[rows, length])
}

/// An empty vector with room for `n` values, or an error (MemoryError in Python) when the
/// allocation fails.
fn try_reserved<T>(key: &str, n: usize) -> Result<Vec<T>> {
    let mut out = Vec::new();
    out.try_reserve_exact(n)
        .map_err(|_| CollateError::OutOfMemory {
            key: key.into(),
            bytes: n.saturating_mul(std::mem::size_of::<T>()),
        })?;
    Ok(out)
}

/// The length every row of a group is padded to, or None for do_not_pad.
pub fn target_length(
    lead: &str,
    lengths: &[usize],
    strategy: Strategy,
    pad_to_multiple_of: Option<usize>,
) -> Result<Option<usize>> {
    let target = match strategy {
        Strategy::DoNotPad => return Ok(None),
        Strategy::Longest => lengths.iter().copied().max().unwrap_or(0),
        Strategy::MaxLength(max_length) => max_length,
    };
    // The limit is the rounded length, as in transformers' `_pad`.
    let target = round_up(target, pad_to_multiple_of).map_err(|err| match err {
        CollateError::InvalidOption(_) if pad_to_multiple_of != Some(0) => {
            CollateError::OutputTooLarge {
                key: lead.into(),
                shape: vec![lengths.len(), target],
            }
        }
        other => other,
    })?;
    // Checked before anything is allocated (every padded key has the lead's shape).
    output_size::<i64>(lead, lengths.len(), target)?;
    if let Some((row, &length)) = lengths.iter().enumerate().find(|(_, &l)| l > target) {
        return Err(CollateError::TooLong {
            key: lead.into(),
            row,
            length,
            max_length: target,
        });
    }
    Ok(Some(target))
}

/// Copies ragged rows into one `rows × target` buffer prefilled with `pad`.
pub fn fill<T: Copy>(
    key: &str,
    values: &[T],
    offsets: &[usize],
    target: usize,
    pad: T,
    left: bool,
) -> Result<Vec<T>> {
    let filled = fill_in_place(
        key,
        &row_lengths(offsets),
        target,
        pad,
        left,
        copy_rows(values, offsets),
    )?;
    filled.ok_or_else(|| offsets_past_values(key))
}

fn row_lengths(offsets: &[usize]) -> Vec<usize> {
    offsets
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .collect()
}

fn offsets_past_values(key: &str) -> CollateError {
    CollateError::InvalidOption(format!("'{key}': offsets past its values"))
}

/// The row writer of `fill`: row `row` is `values[offsets[row]..offsets[row + 1]]`.
fn copy_rows<'a, T: Copy>(
    values: &'a [T],
    offsets: &'a [usize],
) -> impl FnMut(usize, &mut Slots<'_, T>) -> bool + 'a {
    move |row, out| {
        let src = offsets
            .get(row)
            .zip(offsets.get(row + 1))
            .and_then(|(&start, &end)| values.get(start..end));
        match src {
            Some(src) => {
                out.extend_from_slice(src);
                true
            }
            None => false,
        }
    }
}

/// The one fill of padded rows (`fill`, `attention_mask`, `position_ids` and the bindings'
/// straight-from-rows readers are its row writers): a fresh `rows × target`
/// buffer holding, row by row, the values `write_row(row, out)` appends to `out` (exactly
/// `lengths[row]` of them) and `pad` in the row's other slots, before the values when `left`.
/// Rows are written in order; `write_row` returns false (or appends some other number of
/// values) to give up, and then the result is `Ok(None)`. A row longer than `target` is an
/// error naming it. The size is checked before anything is reserved.
///
/// Every slot is written once, padding and values alike: no pass prefills the buffer.
pub fn fill_in_place<T: Copy>(
    key: &str,
    lengths: &[usize],
    target: usize,
    pad: T,
    left: bool,
    mut write_row: impl FnMut(usize, &mut Slots<'_, T>) -> bool,
) -> Result<Option<Vec<T>>> {
    let size = output_size::<T>(key, lengths.len(), target)?;
    let mut buffer: Vec<T> = try_reserved(key, size)?;
    let Some(slots) = buffer.spare_capacity_mut().get_mut(..size) else {
        return Err(CollateError::OutOfMemory {
            key: key.into(),
            bytes: size.saturating_mul(std::mem::size_of::<T>()),
        });
    };
    let mut out = Slots::new(slots);
    for (row, &length) in lengths.iter().enumerate() {
        let Some(padding) = target.checked_sub(length) else {
            return Err(CollateError::TooLong {
                key: key.into(),
                row,
                length,
                max_length: target,
            });
        };
        // Within the buffer: row < rows and length <= target, in rows × target slots.
        let row_end = out.len() + target;
        if left {
            out.resize(out.len() + padding, pad);
        }
        let start = out.len();
        if !write_row(row, &mut out) || out.overflowed || out.len() != start + length {
            return Ok(None);
        }
        out.resize(row_end, pad);
    }
    if out.overflowed || out.len() != size {
        return Ok(None);
    }
    // SAFETY: `out` wrote every one of the `size` slots (it counts only written slots, from
    // the start, never past them), which lie within the capacity reserved above.
    unsafe { buffer.set_len(size) };
    Ok(Some(buffer))
}

/// `Slots::try_reserve`'s error: the values asked for do not fit in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom;

/// The slots `fill_in_place` hands each row's writer: the buffer being filled, appended to as a
/// `Vec` is (the same method names), but never past its end: an append that does not fit
/// writes nothing and makes the fill give up.
pub struct Slots<'a, T> {
    buffer: &'a mut [MaybeUninit<T>],
    /// The slots written, from the start.
    len: usize,
    overflowed: bool,
}

impl<'a, T: Copy> Slots<'a, T> {
    fn new(buffer: &'a mut [MaybeUninit<T>]) -> Self {
        Slots {
            buffer,
            len: 0,
            overflowed: false,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// `Ok` when `additional` more values fit (nothing is allocated: the buffer is fixed).
    pub fn try_reserve(&mut self, additional: usize) -> std::result::Result<(), NoRoom> {
        if additional <= self.buffer.len() - self.len {
            Ok(())
        } else {
            Err(NoRoom)
        }
    }

    /// Appends `values`: one copy of the slice (a `memcpy`), not a write a value.
    pub fn extend_from_slice(&mut self, values: &[T]) {
        let end = self.len.saturating_add(values.len());
        match self.buffer.get_mut(self.len..end) {
            Some(slots) => {
                // SAFETY: `MaybeUninit<T>` has `T`'s layout, and every `T` is a valid
                // `MaybeUninit<T>`: the slice is only read, as the values it holds.
                let values = unsafe { &*(std::ptr::from_ref(values) as *const [MaybeUninit<T>]) };
                slots.copy_from_slice(values);
                self.len = end;
            }
            None => self.overflowed = true,
        }
    }

    /// Appends `map(value)` for each of `values`: one loop from slice to slice, which the
    /// compiler vectorizes (an `extend` from an iterator checks for leftovers at each value).
    #[inline]
    pub fn extend_mapped<S: Copy>(&mut self, values: &[S], map: impl Fn(S) -> T) {
        let end = self.len.saturating_add(values.len());
        match self.buffer.get_mut(self.len..end) {
            Some(slots) => {
                for (slot, &value) in slots.iter_mut().zip(values) {
                    slot.write(map(value));
                }
                self.len = end;
            }
            None => self.overflowed = true,
        }
    }

    pub fn extend(&mut self, values: impl IntoIterator<Item = T>) {
        let mut values = values.into_iter();
        let mut written = 0;
        for (slot, value) in self.buffer[self.len..].iter_mut().zip(&mut values) {
            slot.write(value);
            written += 1;
        }
        self.len += written;
        // Values left over: the buffer is full.
        if values.next().is_some() {
            self.overflowed = true;
        }
    }

    /// Appends copies of `value` up to `new_len` slots (never shortens).
    pub fn resize(&mut self, new_len: usize, value: T) {
        match self.buffer.get_mut(self.len..new_len) {
            Some(slots) => {
                for slot in slots {
                    slot.write(value);
                }
                self.len = new_len;
            }
            // Past the buffer (or shorter: a Vec would truncate, which no writer needs).
            None => self.overflowed = true,
        }
    }

    /// Forgets the values past `len`. Its one caller is the binding layer's safe int read,
    /// compiled where the raw int reads (`cfg(raw_int_reads)`, from `build.rs`) are not.
    #[cfg_attr(raw_int_reads, allow(dead_code))]
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// The slots not written yet. Its one caller is the binding layer's raw int read
    /// (`cfg(raw_int_reads)`, from `build.rs`), as is `set_len`'s.
    #[cfg_attr(not(raw_int_reads), allow(dead_code))]
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<T>] {
        &mut self.buffer[self.len..]
    }

    /// Marks the first `new_len` slots written.
    ///
    /// # Safety
    /// Every slot below `new_len` must have been written and `new_len` must be at most the
    /// buffer's length, as for `Vec::set_len`.
    #[cfg_attr(not(raw_int_reads), allow(dead_code))]
    pub unsafe fn set_len(&mut self, new_len: usize) {
        self.len = new_len;
    }

    /// The values written so far.
    #[cfg(any(test, not(raw_int_reads)))]
    pub fn written(&mut self) -> &mut [T] {
        let written = &mut self.buffer[..self.len];
        // SAFETY: the first `len` slots were written (every method that raises `len` writes
        // the slots below it first, `set_len`'s caller promises it), and `MaybeUninit<T>` has
        // `T`'s layout.
        unsafe { &mut *(std::ptr::from_mut(written) as *mut [T]) }
    }
}

/// Appends `length` values to `out` through the slots `write` appends them to (a row writer
/// of `fill_in_place` used on a vector): `false`, and `out` unchanged, when `write` gives up
/// or appends some other number of values.
pub fn append_to_vec<T: Copy>(
    out: &mut Vec<T>,
    length: usize,
    write: impl FnOnce(&mut Slots<'_, T>) -> bool,
) -> bool {
    if out.try_reserve(length).is_err() {
        return false;
    }
    let start = out.len();
    let Some(spare) = out.spare_capacity_mut().get_mut(..length) else {
        return false;
    };
    let mut slots = Slots::new(spare);
    if !write(&mut slots) || slots.overflowed || slots.len() != length {
        return false;
    }
    // SAFETY: the `length` slots after `start` are within the capacity reserved above, and
    // every one was written (`slots` counts only written slots from its start).
    unsafe { out.set_len(start + length) };
    true
}

impl Slots<'_, i64> {
    /// Appends `values` widened to int64 (`extend_mapped` with `Into`), in a loop compiled for
    /// AVX2 where the CPU has it (asked at run time; std caches the answer): there the
    /// compiler widens four values an instruction, where the baseline x86_64 set (SSE2) needs
    /// several shuffles for two.
    #[inline]
    pub fn extend_widened<S: Copy + Into<i64>>(&mut self, values: &[S]) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            unsafe { extend_widened_avx2(self, values) };
            return;
        }
        self.extend_mapped(values, Into::into);
    }
}

/// `Slots::extend_widened`'s loop, compiled for AVX2.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn extend_widened_avx2<S: Copy + Into<i64>>(out: &mut Slots<'_, i64>, values: &[S]) {
    out.extend_mapped(values, Into::into);
}

/// Appends `length` slots to `out` for `write` to set (a `fill_in_place` row written into a
/// slice); `false` when `write` gives up.
#[cfg(test)]
pub fn append_slots<T: Copy + Default>(
    out: &mut Slots<'_, T>,
    length: usize,
    write: impl FnOnce(&mut [T]) -> bool,
) -> bool {
    let start = out.len();
    out.resize(start + length, T::default());
    if out.overflowed {
        return false;
    }
    write(&mut out.written()[start..])
}

/// The `rows × target` attention mask of rows of `lengths`: 1 on each row's values, 0 on its
/// padding (before the values when `left`). A row longer than `target` is an error naming it.
pub fn attention_mask(key: &str, lengths: &[usize], target: usize, left: bool) -> Result<Vec<i64>> {
    let mask = fill_in_place(key, lengths, target, 0, left, |row, out| {
        let Some(&length) = lengths.get(row) else {
            return false;
        };
        out.resize(out.len() + length, 1);
        true
    })?;
    mask.ok_or_else(|| CollateError::InvalidOption(format!("'{key}': a row was not written")))
}

/// The `rows × target` position ids of rows of `lengths` padded right: `0..length` on each
/// row's values, 0 on its padding. A row longer than `target` is an error naming it.
pub fn position_ids(key: &str, lengths: &[usize], target: usize) -> Result<Vec<i64>> {
    let positions = fill_in_place(key, lengths, target, 0, false, |row, out| {
        let Some(&length) = lengths.get(row) else {
            return false;
        };
        // usize to i64: `length` slots fit in an allocation, so below isize::MAX.
        out.extend((0..length).map(|position| position as i64));
        true
    })?;
    positions.ok_or_else(|| CollateError::InvalidOption(format!("'{key}': a row was not written")))
}

fn uniform_length(column: &Column) -> Result<Option<usize>> {
    let lengths = column.lengths();
    let Some(&first) = lengths.first() else {
        return Ok(Some(0));
    };
    match lengths.iter().position(|&l| l != first) {
        None => Ok(Some(first)),
        Some(_) if column.shape == Some(Shape::Scalar) => Ok(Some(first)),
        Some(row) => Err(CollateError::Ragged {
            key: column.key.clone(),
            row,
            length: lengths[row],
            expected: first,
        }),
    }
}

fn output_dtype(plan: &Plan, key: &str, kind: Kind, padded: bool) -> DType {
    if let Some(&dtype) = plan.dtypes.get(key) {
        return dtype;
    }
    match kind {
        // An integer pad value mixed into bools makes an integer array, as in numpy and torch.
        Kind::Bool if padded => DType::I64,
        Kind::Bool => DType::Bool,
        Kind::Int => DType::I64,
        Kind::Float => plan.float_dtype,
    }
}

/// An element type of an output's data.
trait OutputElement: Copy {
    fn data(values: Vec<Self>) -> Data;
}

macro_rules! output_element {
    ($type:ty, $variant:ident) => {
        impl OutputElement for $type {
            fn data(values: Vec<Self>) -> Data {
                Data::$variant(values)
            }
        }
    };
}

output_element!(bool, Bool);
output_element!(i64, I64);
output_element!(f32, F32);
output_element!(f64, F64);

/// A column's values converted to an output's dtype, before they are laid out.
enum Values<'a, T> {
    Borrowed(&'a [T]),
    Owned(Vec<T>),
}

impl<T: Copy> Values<'_, T> {
    fn as_slice(&self) -> &[T] {
        match self {
            Values::Borrowed(values) => values,
            Values::Owned(values) => values,
        }
    }
}

/// `values` laid out as `planned` says, in a fresh vector (the values themselves when they
/// are already laid out).
fn place<T: OutputElement>(
    planned: &PlannedOutput,
    offsets: &[usize],
    values: Values<'_, T>,
    pad: T,
) -> Result<Data> {
    let key = planned.key.as_str();
    Ok(T::data(match (planned.width, values) {
        (Some(width), values) => fill(key, values.as_slice(), offsets, width, pad, planned.left)?,
        (None, Values::Owned(values)) => values,
        (None, Values::Borrowed(values)) => {
            let mut out = try_reserved(key, values.len())?;
            out.extend_from_slice(values);
            out
        }
    }))
}

/// Lays one column out as `planned` says (its dtype, padded rows to its width when given).
fn materialize(column: &Column, planned: &PlannedOutput) -> Result<Data> {
    let offsets = &column.offsets;
    let is_float = column.kind == Some(Kind::Float);
    let pad = planned.pad_value;
    match planned.dtype {
        // The common case, padded straight from the gathered ints.
        DType::I64 if !is_float && planned.width.is_some() => place(
            planned,
            offsets,
            Values::Borrowed(column.fitting_ints()?),
            pad,
        ),
        // Float values forced to int64 truncate toward zero, as torch.tensor(dtype=long) does.
        DType::I64 => place(planned, offsets, Values::Owned(column.to_ints()?), pad),
        DType::Bool => {
            let flat: Vec<bool> = if is_float {
                column.floats.iter().map(|&v| v != 0.0).collect()
            } else {
                column.fitting_ints()?.iter().map(|&v| v != 0).collect()
            };
            place(planned, offsets, Values::Owned(flat), pad != 0)
        }
        DType::F32 => place(
            planned,
            offsets,
            Values::Owned(column.to_f32s()?),
            pad as f32,
        ),
        DType::F64 => place(
            planned,
            offsets,
            Values::Owned(column.to_floats()?),
            pad as f64,
        ),
    }
}

fn ones_like_lengths(key: &str, lengths: &[usize]) -> Column {
    let total = lengths.iter().sum();
    let mut mask = Column::with_capacity(key, lengths.len(), total);
    for &length in lengths {
        mask.extend_ints(std::iter::repeat_n(1, length));
        // Cannot fail: every row has the same (sequence) shape.
        let _ = mask.end_row(Shape::Sequence);
    }
    mask.kind = Some(Kind::Int);
    mask
}

/// Turns gathered columns into output buffers, following `plan`. Output order is the columns'
/// order, with a created attention mask appended after them (where transformers puts it).
pub fn collate(columns: Vec<Column>, plan: &Plan) -> Result<Vec<Output>> {
    plan_outputs(columns, plan)?.fill()
}

/// One output of [`plan_outputs`] before its values are written: its key, dtype and shape,
/// and how its column is laid out.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedOutput {
    pub key: String,
    pub dtype: DType,
    pub layout: Layout,
    /// The padded row length, or None where the values are taken as they are.
    width: Option<usize>,
    pad_value: i64,
    left: bool,
}

/// Gathered columns checked against a plan, each with the output it becomes: `collate` in
/// two steps, every output's size checked (the batch together) before the first is reserved.
pub struct Planned {
    columns: Vec<Column>,
    pub outputs: Vec<PlannedOutput>,
}

impl PlannedOutput {
    /// The padded row length, or None where the values are taken as they are.
    pub fn width(&self) -> Option<usize> {
        self.width
    }

    /// The value padded rows are filled with.
    pub fn pad_value(&self) -> i64 {
        self.pad_value
    }

    /// Whether padding goes before the values.
    pub fn left(&self) -> bool {
        self.left
    }
}

impl Planned {
    /// Writes each output's values into a fresh vector.
    pub fn fill(self) -> Result<Vec<Output>> {
        self.fill_with(|_, _, _| Ok(None))
    }

    /// `fill`, with a say for the caller: `write(index, column, output)` may write output
    /// `index` itself (`Some`: its data, laid out as `output` says) or leave it to `fill`
    /// (`None`), having first made `column` whole if it held only its rows' lengths (see
    /// `arrow::pad_batch`).
    pub fn fill_with(
        self,
        mut write: impl FnMut(usize, &mut Column, &PlannedOutput) -> Result<Option<Data>>,
    ) -> Result<Vec<Output>> {
        let mut outputs = Vec::with_capacity(self.outputs.len());
        let pairs = self.columns.into_iter().zip(self.outputs);
        for (index, (mut column, planned)) in pairs.enumerate() {
            let data = match write(index, &mut column, &planned)? {
                Some(data) => data,
                None => materialize(&column, &planned)?,
            };
            outputs.push(Output {
                key: planned.key,
                data,
                layout: planned.layout,
            });
        }
        Ok(outputs)
    }
}

/// Checks gathered columns against `plan` and works out each output's dtype and shape
/// (`collate` without writing the values; see [`Planned::fill`]).
pub fn plan_outputs(mut columns: Vec<Column>, plan: &Plan) -> Result<Planned> {
    let rows = columns
        .first()
        .map(Column::rows)
        .ok_or(CollateError::EmptyBatch)?;
    if rows == 0 {
        return Err(CollateError::EmptyBatch);
    }
    if let Some(column) = columns.iter().find(|c| c.rows() != rows) {
        return Err(CollateError::MissingKey {
            key: column.key.clone(),
            row: column.rows().min(rows),
        });
    }
    // key -> (target, pad value, left, padded at all)
    let mut padding: HashMap<String, (Option<usize>, i64, bool)> = HashMap::new();
    for group in &plan.groups {
        let Some(lead) = columns.iter().find(|c| c.key == group.lead) else {
            return Err(CollateError::MissingKey {
                key: group.lead.clone(),
                row: 0,
            });
        };
        if lead.shape == Some(Shape::Scalar) {
            return Err(CollateError::MixedShape {
                key: group.lead.clone(),
                row: 0,
            });
        }
        if group.integer_lead {
            if let Some(row) = lead.first_python_float_row {
                return Err(CollateError::FloatTokenIds {
                    key: group.lead.clone(),
                    row,
                });
            }
        }
        let lead_lengths = lead.lengths();
        let mut target = target_length(
            &group.lead,
            &lead_lengths,
            group.strategy,
            group.pad_to_multiple_of,
        )?;
        if target.is_none() {
            // Stacked without padding: keys padded alongside still follow the lead's length.
            match uniform_length(lead) {
                Ok(length) => target = length,
                Err(err) if !plan.allow_ragged => return Err(err),
                Err(_) => {}
            }
        }
        let check_lengths = group.strategy != Strategy::DoNotPad || !plan.allow_ragged;
        if let Some(mask_key) = &group.attention_mask {
            if !columns.iter().any(|c| &c.key == mask_key) {
                columns.push(ones_like_lengths(mask_key, &lead_lengths));
            }
        }
        for (key, pad_value, same_length) in group.members() {
            let Some(column) = columns.iter().find(|c| c.key == key) else {
                continue;
            };
            if column.shape == Some(Shape::Scalar) {
                return Err(CollateError::MixedShape {
                    key: key.into(),
                    row: 0,
                });
            }
            for (row, length) in column.lengths().into_iter().enumerate() {
                if same_length && check_lengths && length != lead_lengths[row] {
                    return Err(CollateError::LengthMismatch {
                        key: key.into(),
                        row,
                        length,
                        main_key: group.lead.clone(),
                        main_length: lead_lengths[row],
                    });
                }
                if let Some(max_length) = target {
                    if length > max_length {
                        return Err(CollateError::TooLong {
                            key: key.into(),
                            row,
                            length,
                            max_length,
                        });
                    }
                }
            }
            padding.insert(key.to_string(), (target, pad_value, group.left));
        }
    }

    let mut outputs = Vec::with_capacity(columns.len());
    for column in &columns {
        if column.rows() != rows {
            return Err(CollateError::MissingKey {
                key: column.key.clone(),
                row: column.rows(),
            });
        }
        let (target, pad_value, left) = match padding.get(&column.key) {
            Some(&spec) => spec,
            None => match uniform_length(column) {
                Ok(length) if column.shape == Some(Shape::Sequence) => (length, 0, false),
                Ok(_) => (None, 0, false),
                Err(err) if !plan.allow_ragged => return Err(err),
                Err(_) => (None, 0, false),
            },
        };
        let lengths = column.lengths();
        let padded = target.is_some_and(|t| lengths.iter().any(|&l| l != t));
        let dtype = output_dtype(plan, &column.key, column.output_kind(), padded);
        // `np.asarray` makes an object array of a list with an int past uint64; Python lists
        // (`allow_ragged`) and a dtype the caller names take it as a float.
        if dtype == DType::F64 && !plan.allow_ragged && !plan.dtypes.contains_key(&column.key) {
            column.beyond_u64_error()?;
        }
        let layout = match (column.shape, target) {
            (Some(Shape::Scalar), _) => Layout::Scalar { rows },
            (_, Some(columns)) => Layout::Matrix { rows, columns },
            (_, None) => Layout::Ragged {
                offsets: column.offsets.clone(),
            },
        };
        let width = target.filter(|_| column.shape != Some(Shape::Scalar));
        outputs.push(PlannedOutput {
            key: column.key.clone(),
            dtype,
            layout,
            width,
            pad_value,
            left,
        });
    }
    // The padded outputs together, before the first is reserved (each passed the rule alone
    // through `target_length`).
    let padded: Vec<(&str, usize)> = outputs
        .iter()
        .filter_map(|output| match output.layout {
            Layout::Matrix { rows, columns } => Some((
                output.key.as_str(),
                rows.saturating_mul(columns)
                    .saturating_mul(output.dtype.item_size()),
            )),
            _ => None,
        })
        .collect();
    sizes::check_batch(&padded)?;
    Ok(Planned { columns, outputs })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq_column(key: &str, rows: &[&[i64]]) -> Column {
        let mut c = Column::new(key);
        for row in rows {
            c.extend_ints(row.iter().copied());
            c.end_row(Shape::Sequence).unwrap();
        }
        c
    }

    fn scalar_column(key: &str, values: &[i64]) -> Column {
        let mut c = Column::new(key);
        for &v in values {
            c.push_int(v);
            c.end_row(Shape::Scalar).unwrap();
        }
        c
    }

    fn group(strategy: Strategy, left: bool) -> PadGroup {
        PadGroup {
            lead: "input_ids".into(),
            lead_pad_value: 0,
            strategy,
            pad_to_multiple_of: None,
            left,
            followers: vec![Follower {
                key: "token_type_ids".into(),
                pad_value: 9,
                same_length_as_lead: true,
            }],
            attention_mask: Some("attention_mask".into()),
            integer_lead: false,
        }
    }

    fn plan(groups: Vec<PadGroup>) -> Plan {
        Plan {
            groups,
            float_dtype: DType::F32,
            allow_ragged: false,
            dtypes: HashMap::new(),
        }
    }

    #[test]
    fn integer_lead_refuses_python_floats_and_names_their_row() {
        let mut ids = Column::new("input_ids");
        ids.extend_ints([1, 2]);
        ids.end_row(Shape::Sequence).unwrap();
        ids.push_int(3);
        ids.push_float(4.5);
        ids.mark_python_floats(); // as the reader notes a Python float
        ids.end_row(Shape::Sequence).unwrap();
        let mut token_ids = group(Strategy::Longest, false);
        token_ids.integer_lead = true;
        let err = collate(vec![ids.clone()], &plan(vec![token_ids.clone()])).unwrap_err();
        assert_eq!(
            err,
            CollateError::FloatTokenIds {
                key: "input_ids".into(),
                row: 1
            }
        );
        // Without the flag (TRL's pad, labels), floats pad as floats.
        let outputs = collate(vec![ids], &plan(vec![group(Strategy::Longest, false)])).unwrap();
        assert_eq!(outputs[0].key, "input_ids");
        // Floats from an array's buffer (never noted) are a float array's: padded as they are.
        let mut from_arrays = Column::new("input_ids");
        from_arrays.extend_floats([1.0, 2.5]);
        from_arrays.end_row(Shape::Sequence).unwrap();
        assert_eq!(from_arrays.first_python_float_row, None);
        assert!(collate(vec![from_arrays], &plan(vec![token_ids])).is_ok());
    }

    /// A label column: 2.5, then an int past int64 (`fits_u64` says whether past uint64 too).
    fn float_and_unfit_labels(fits_u64: bool) -> Column {
        let mut c = Column::new("label");
        c.push_float(2.5);
        c.end_row(Shape::Scalar).unwrap();
        c.push_unfit_int(4.0 * 9_223_372_036_854_775_808.0, fits_u64);
        c.end_row(Shape::Scalar).unwrap();
        c
    }

    #[test]
    fn an_int_past_int64_beside_a_float_is_its_float_or_raises_past_uint64_under_numpy() {
        let big = 4.0 * 9_223_372_036_854_775_808.0;
        let overflow = CollateError::Overflow {
            key: "label".into(),
            row: 1,
            position: 0,
        };
        // torch's float32: any finite value.
        let out = collate(vec![float_and_unfit_labels(false)], &plan(vec![])).unwrap();
        assert_eq!(out[0].data, Data::F32(vec![2.5, big as f32]));
        // numpy's inferred float64: an int past uint64 makes an object array there.
        let numpy = Plan {
            float_dtype: DType::F64,
            ..plan(vec![])
        };
        let fits = collate(vec![float_and_unfit_labels(true)], &numpy).unwrap();
        assert_eq!(fits[0].data, Data::F64(vec![2.5, big]));
        assert_eq!(
            collate(vec![float_and_unfit_labels(false)], &numpy).unwrap_err(),
            overflow
        );
        // Python lists and a named dtype take it as a float; int64 cannot hold it.
        let lists = Plan {
            allow_ragged: true,
            ..numpy.clone()
        };
        assert!(collate(vec![float_and_unfit_labels(false)], &lists).is_ok());
        let mut named = numpy.clone();
        named.dtypes.insert("label".into(), DType::F32);
        assert!(collate(vec![float_and_unfit_labels(false)], &named).is_ok());
        named.dtypes.insert("label".into(), DType::I64);
        assert_eq!(
            collate(vec![float_and_unfit_labels(true)], &named).unwrap_err(),
            overflow
        );
    }

    #[test]
    fn pads_right_and_creates_mask_last() {
        let cols = vec![
            seq_column("input_ids", &[&[5, 6, 7], &[8]]),
            seq_column("token_type_ids", &[&[1, 1, 1], &[1]]),
            scalar_column("label", &[3, 4]),
        ];
        let out = collate(cols, &plan(vec![group(Strategy::Longest, false)])).unwrap();
        let keys: Vec<_> = out.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(
            keys,
            ["input_ids", "token_type_ids", "label", "attention_mask"]
        );
        assert_eq!(out[0].data, Data::I64(vec![5, 6, 7, 8, 0, 0]));
        assert_eq!(
            out[0].layout,
            Layout::Matrix {
                rows: 2,
                columns: 3
            }
        );
        assert_eq!(out[1].data, Data::I64(vec![1, 1, 1, 1, 9, 9]));
        assert_eq!(out[2].data, Data::I64(vec![3, 4]));
        assert_eq!(out[2].layout, Layout::Scalar { rows: 2 });
        assert_eq!(out[3].data, Data::I64(vec![1, 1, 1, 1, 0, 0]));
    }

    #[test]
    fn pads_left_to_multiple() {
        let mut g = group(Strategy::Longest, true);
        g.pad_to_multiple_of = Some(4);
        let cols = vec![seq_column("input_ids", &[&[5, 6, 7], &[8]])];
        let out = collate(cols, &plan(vec![g])).unwrap();
        assert_eq!(out[0].data, Data::I64(vec![0, 5, 6, 7, 0, 0, 0, 8]));
        assert_eq!(out[1].data, Data::I64(vec![0, 1, 1, 1, 0, 0, 0, 1]));
    }

    #[test]
    fn max_length_rejects_a_longer_row_by_index() {
        let cols = vec![seq_column("input_ids", &[&[1], &[1, 2, 3]])];
        let err = collate(cols, &plan(vec![group(Strategy::MaxLength(2), false)])).unwrap_err();
        assert_eq!(
            err,
            CollateError::TooLong {
                key: "input_ids".into(),
                row: 1,
                length: 3,
                max_length: 2
            }
        );
    }

    #[test]
    fn follower_length_mismatch_names_row() {
        let cols = vec![
            seq_column("input_ids", &[&[1, 2], &[1, 2]]),
            seq_column("token_type_ids", &[&[0, 0], &[0]]),
        ];
        let err = collate(cols, &plan(vec![group(Strategy::Longest, false)])).unwrap_err();
        assert!(matches!(err, CollateError::LengthMismatch { row: 1, .. }));
    }

    #[test]
    fn ragged_unpadded_key_is_an_error_or_kept_when_allowed() {
        let cols = vec![seq_column("labels", &[&[1, 2], &[1]])];
        let err = collate(cols.clone(), &plan(vec![])).unwrap_err();
        assert_eq!(
            err,
            CollateError::Ragged {
                key: "labels".into(),
                row: 1,
                length: 1,
                expected: 2
            }
        );
        let mut p = plan(vec![]);
        p.allow_ragged = true;
        let out = collate(cols, &p).unwrap();
        assert_eq!(
            out[0].layout,
            Layout::Ragged {
                offsets: vec![0, 2, 3]
            }
        );
    }

    #[test]
    fn independent_follower_pads_to_lead_target() {
        let mut g = group(Strategy::Longest, false);
        g.followers = vec![Follower {
            key: "labels".into(),
            pad_value: -100,
            same_length_as_lead: false,
        }];
        g.attention_mask = None;
        let cols = vec![
            seq_column("input_ids", &[&[1, 2, 3], &[1]]),
            seq_column("labels", &[&[7], &[8, 9]]),
        ];
        let out = collate(cols, &plan(vec![g])).unwrap();
        assert_eq!(out[1].data, Data::I64(vec![7, -100, -100, 8, 9, -100]));
    }

    #[test]
    fn empty_batch_is_an_error() {
        assert_eq!(
            collate(vec![], &plan(vec![])).unwrap_err(),
            CollateError::EmptyBatch
        );
        let cols = vec![Column::new("input_ids")];
        assert_eq!(
            collate(cols, &plan(vec![])).unwrap_err(),
            CollateError::EmptyBatch
        );
    }

    #[test]
    fn bool_column_becomes_int_only_when_padded_and_floats_follow_plan() {
        let mut mask = Column::new("m");
        mask.extend_bools([true, true]);
        mask.end_row(Shape::Sequence).unwrap();
        let mut f = Column::new("f");
        f.push_float(0.25);
        f.end_row(Shape::Scalar).unwrap();
        let out = collate(vec![mask, f], &plan(vec![])).unwrap();
        assert_eq!(out[0].data, Data::Bool(vec![true, true]));
        assert_eq!(out[1].data, Data::F32(vec![0.25]));
    }

    #[test]
    fn forced_int_dtype_truncates_floats() {
        let mut f = Column::new("label");
        for v in [1.0, 2.7, -1.5] {
            f.push_float(v);
            f.end_row(Shape::Scalar).unwrap();
        }
        let mut p = plan(vec![]);
        p.dtypes.insert("label".into(), DType::I64);
        let out = collate(vec![f], &p).unwrap();
        assert_eq!(out[0].data, Data::I64(vec![1, 2, -1]));
    }

    #[test]
    fn fill_in_place_pads_around_each_row_and_can_give_up() {
        let rows: [&[i64]; 3] = [&[1, 2], &[], &[3, 4, 5]];
        let lengths: Vec<usize> = rows.iter().map(|r| r.len()).collect();
        for (left, expected) in [
            (false, vec![1, 2, 9, 9, 9, 9, 3, 4, 5]),
            (true, vec![9, 1, 2, 9, 9, 9, 3, 4, 5]),
        ] {
            let mut seen = Vec::new();
            let out = fill_in_place("ids", &lengths, 3, 9, left, |row, out| {
                seen.push(row);
                append_slots(out, rows[row].len(), |place| {
                    place.copy_from_slice(rows[row]);
                    true
                })
            });
            assert_eq!(out.unwrap(), Some(expected));
            assert_eq!(seen, [0, 1, 2]);
        }
        let gave_up = fill_in_place("ids", &lengths, 3, 0, false, |row, out| {
            out.extend_from_slice(rows[row]);
            row != 1
        });
        assert_eq!(gave_up.unwrap(), None);
        // A row that appends some other number of values than its length gives up too.
        let short = fill_in_place("ids", &lengths, 3, 0, false, |_, out| {
            out.extend_from_slice(&[1]);
            true
        });
        assert_eq!(short.unwrap(), None);
        let err = fill_in_place("ids", &lengths, 2, 0, false, |row, out| {
            out.extend_from_slice(rows[row]);
            true
        })
        .unwrap_err();
        assert_eq!(
            err,
            CollateError::TooLong {
                key: "ids".into(),
                row: 2,
                length: 3,
                max_length: 2
            }
        );
        let err = fill_in_place::<i64>("ids", &[1, 1], usize::MAX, 0, false, |_, _| true);
        assert!(
            matches!(err, Err(CollateError::OutputTooLarge { .. })),
            "{err:?}"
        );
    }

    fn uninit<T>(n: usize) -> Vec<MaybeUninit<T>> {
        (0..n).map(|_| MaybeUninit::uninit()).collect()
    }

    /// Row `row` of `rows` padded to `target` with `pad`, the padding first when `left`: the
    /// layout every fill must give, written the plain way.
    fn padded_by_hand<T: Copy>(rows: &[Vec<T>], target: usize, pad: T, left: bool) -> Vec<T> {
        let mut out = Vec::new();
        for row in rows {
            let padding = std::iter::repeat_n(pad, target - row.len());
            if left {
                out.extend(padding.chain(row.iter().copied()));
            } else {
                out.extend(row.iter().copied().chain(padding));
            }
        }
        out
    }

    #[test]
    fn every_fill_lays_rows_out_as_by_hand_on_random_lengths() {
        use crate::core::rng::{Rng, Xoshiro256PlusPlus};
        let mut rng = Xoshiro256PlusPlus::from_seed(39);
        for _ in 0..300 {
            let rows = 1 + rng.below(6) as usize;
            let lengths: Vec<usize> = (0..rows).map(|_| rng.below(12) as usize).collect();
            let multiple = [None, Some(1), Some(3), Some(8)][rng.below(4) as usize];
            let strategy = if rng.below(2) == 0 {
                Strategy::Longest
            } else {
                Strategy::MaxLength(
                    lengths.iter().copied().max().unwrap_or(0) + rng.below(5) as usize,
                )
            };
            let target = target_length("ids", &lengths, strategy, multiple)
                .unwrap()
                .unwrap();
            if let Some(multiple) = multiple {
                assert_eq!(target % multiple, 0);
            }
            let mut offsets = vec![0];
            let mut values = Vec::new();
            let mut by_row = Vec::new();
            for &length in &lengths {
                let row: Vec<i64> = (0..length).map(|_| 1 + rng.below(1000) as i64).collect();
                values.extend_from_slice(&row);
                offsets.push(values.len());
                by_row.push(row);
            }
            let ones: Vec<Vec<i64>> = lengths.iter().map(|&l| vec![1; l]).collect();
            for left in [false, true] {
                let expected = padded_by_hand(&by_row, target, -7, left);
                let what = format!("lengths {lengths:?}, target {target}, left {left}");
                assert_eq!(
                    fill("ids", &values, &offsets, target, -7, left).unwrap(),
                    expected,
                    "fill: {what}"
                );
                // A row writer appending through a slice, as the straight-from-rows readers do.
                let sliced = fill_in_place("ids", &lengths, target, -7, left, |row, out| {
                    append_slots(out, lengths[row], |place| {
                        place.copy_from_slice(&by_row[row]);
                        true
                    })
                });
                assert_eq!(sliced.unwrap(), Some(expected.clone()), "slices: {what}");
                let floats: Vec<f64> = values.iter().map(|&v| v as f64 / 4.0).collect();
                let float_rows: Vec<Vec<f64>> = by_row
                    .iter()
                    .map(|row| row.iter().map(|&v| v as f64 / 4.0).collect())
                    .collect();
                assert_eq!(
                    fill("x", &floats, &offsets, target, 0.5, left).unwrap(),
                    padded_by_hand(&float_rows, target, 0.5, left),
                    "float fill: {what}"
                );
                assert_eq!(
                    attention_mask("mask", &lengths, target, left).unwrap(),
                    padded_by_hand(&ones, target, 0, left),
                    "mask: {what}"
                );
                // The same through `collate`, the group's keys and its created mask together.
                let rows: Vec<&[i64]> = by_row.iter().map(Vec::as_slice).collect();
                let types: Vec<Vec<i64>> = lengths.iter().map(|&l| vec![1; l]).collect();
                let type_rows: Vec<&[i64]> = types.iter().map(Vec::as_slice).collect();
                let mut padding = group(strategy, left);
                padding.lead_pad_value = -7;
                padding.pad_to_multiple_of = multiple;
                let outputs = collate(
                    vec![
                        seq_column("input_ids", &rows),
                        seq_column("token_type_ids", &type_rows),
                    ],
                    &plan(vec![padding]),
                )
                .unwrap();
                let datas: Vec<_> = outputs.iter().map(|o| o.data.clone()).collect();
                assert_eq!(
                    datas,
                    [
                        Data::I64(expected),
                        Data::I64(padded_by_hand(&types, target, 9, left)),
                        Data::I64(padded_by_hand(&ones, target, 0, left)),
                    ],
                    "collate: {what}"
                );
            }
            let positions: Vec<Vec<i64>> =
                lengths.iter().map(|&l| (0..l as i64).collect()).collect();
            assert_eq!(
                position_ids("position_ids", &lengths, target).unwrap(),
                padded_by_hand(&positions, target, 0, false),
                "positions: lengths {lengths:?}, target {target}"
            );
        }
    }

    #[test]
    fn slots_take_mapped_slices_whole_or_not_at_all() {
        let mut buffer = uninit::<i64>(5);
        let mut slots = Slots::new(&mut buffer[..4]);
        slots.extend_mapped(&[1u8, 255], i64::from);
        slots.extend_mapped(&[-3i32], i64::from);
        assert_eq!(slots.written(), [1, 255, -3]);
        // Two more do not fit in the one slot left: nothing is written.
        slots.extend_mapped(&[4u16, 5], i64::from);
        assert!(slots.overflowed);
        assert_eq!(slots.len(), 3);
    }

    #[test]
    fn widened_values_are_the_values_at_every_length_and_type() {
        fn check<S: Copy + Into<i64>>(values: &[S]) {
            // Every length around the vector widths, from every start (unaligned slices).
            for start in 0..4.min(values.len()) {
                for end in start..values.len() {
                    let part = &values[start..end];
                    let mut buffer = uninit::<i64>(part.len() + 1);
                    let mut slots = Slots::new(&mut buffer[..]);
                    slots.extend_widened(part);
                    let expected: Vec<i64> = part.iter().map(|&v| v.into()).collect();
                    assert_eq!(slots.written(), expected);
                    assert!(!slots.overflowed);
                }
            }
            // Past the buffer: nothing is written.
            let mut buffer = uninit::<i64>(values.len().saturating_sub(1));
            let mut slots = Slots::new(&mut buffer[..]);
            slots.extend_widened(values);
            assert!(slots.overflowed || values.is_empty());
            assert_eq!(slots.len(), 0);
        }
        let extremes = |min: i64, max: i64| -> Vec<i64> {
            (0..37)
                .map(|i| [min, max, 0, -1, 1, i][i as usize % 6])
                .collect()
        };
        let ints = extremes(i64::from(i8::MIN), i64::from(i8::MAX));
        check(&ints.iter().map(|&v| v as i8).collect::<Vec<_>>());
        check(&ints.iter().map(|&v| v as u8).collect::<Vec<_>>());
        let ints = extremes(i64::from(i16::MIN), i64::from(i16::MAX));
        check(&ints.iter().map(|&v| v as i16).collect::<Vec<_>>());
        check(&ints.iter().map(|&v| v as u16).collect::<Vec<_>>());
        let ints = extremes(i64::from(i32::MIN), i64::from(i32::MAX));
        check(&ints.iter().map(|&v| v as i32).collect::<Vec<_>>());
        check(&ints.iter().map(|&v| v as u32).collect::<Vec<_>>());
    }

    #[test]
    fn slots_never_write_past_the_buffer() {
        // A row writer that appends more than the whole buffer: the fill gives up.
        let filled = fill_in_place("ids", &[2, 2], 2, 0, false, |_, out| {
            out.extend_from_slice(&[1, 2, 3, 4, 5, 6]);
            true
        });
        assert_eq!(filled, Ok(None));
        let mut buffer = uninit::<i64>(4);
        let mut slots = Slots::new(&mut buffer[..2]);
        assert_eq!(slots.try_reserve(3), Err(NoRoom));
        slots.extend_from_slice(&[7]);
        slots.resize(2, 8);
        assert_eq!(slots.written(), [7, 8]);
        slots.extend_from_slice(&[9]);
        assert!(slots.overflowed);
        assert_eq!(slots.len(), 2);
        let mut out = vec![1i64];
        assert!(append_to_vec(&mut out, 2, |slots| {
            slots.extend([2, 3]);
            true
        }));
        assert!(!append_to_vec(&mut out, 2, |slots| {
            slots.extend_from_slice(&[4]);
            true
        }));
        assert_eq!(out, [1, 2, 3]);
    }

    #[test]
    fn planned_outputs_describe_each_output_and_fill_as_collate_does() {
        let columns = || {
            let mut label = Column::new("label");
            for v in [0.5, 1.5] {
                label.push_float(v);
                label.end_row(Shape::Scalar).unwrap();
            }
            vec![
                seq_column("input_ids", &[&[5, 6, 7], &[8]]),
                seq_column("token_type_ids", &[&[1, 1, 1], &[1]]),
                label,
            ]
        };
        let plan = plan(vec![group(Strategy::Longest, true)]);
        let expected = collate(columns(), &plan).unwrap();
        let planned = plan_outputs(columns(), &plan).unwrap();
        let shapes: Vec<_> = planned
            .outputs
            .iter()
            .map(|o| (o.key.as_str(), o.dtype, o.layout.clone()))
            .collect();
        let matrix = Layout::Matrix {
            rows: 2,
            columns: 3,
        };
        assert_eq!(
            shapes,
            [
                ("input_ids", DType::I64, matrix.clone()),
                ("token_type_ids", DType::I64, matrix.clone()),
                ("label", DType::F32, Layout::Scalar { rows: 2 }),
                ("attention_mask", DType::I64, matrix),
            ]
        );
        assert_eq!(planned.fill().unwrap(), expected);
    }

    #[test]
    fn strategy_parse_rejects_unknown() {
        assert!(Strategy::parse("shortest", None).is_err());
        assert!(Strategy::parse("max_length", None).is_err());
        assert_eq!(
            Strategy::parse("max_length", Some(8)).unwrap(),
            Strategy::MaxLength(8)
        );
    }

    #[test]
    fn round_up_to_multiple() {
        assert_eq!(round_up(5, Some(4)).unwrap(), 8);
        assert_eq!(round_up(8, Some(4)).unwrap(), 8);
        assert!(round_up(8, Some(0)).is_err());
        assert!(round_up(usize::MAX - 1, Some(usize::MAX / 2 + 1)).is_err());
    }

    #[test]
    fn impossible_sizes_are_errors_not_panics() {
        let cols = || vec![seq_column("input_ids", &[&[1, 2, 3], &[1], &[2]])];
        for strategy in [
            Strategy::MaxLength(usize::MAX),
            Strategy::MaxLength(1 << 63),
            Strategy::MaxLength(1 << 62),
        ] {
            let err = collate(cols(), &plan(vec![group(strategy, false)])).unwrap_err();
            assert!(
                matches!(err, CollateError::OutputTooLarge { ref key, ref shape } if key == "input_ids" && shape[0] == 3),
                "{err:?}"
            );
        }
        let mut g = group(Strategy::Longest, false);
        g.pad_to_multiple_of = Some(1 << 63);
        let err = collate(cols(), &plan(vec![g])).unwrap_err();
        assert!(
            matches!(err, CollateError::OutputTooLarge { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn an_impossible_size_is_refused_before_it_is_reserved() {
        // 2**45 int64 values: more than any machine here has, refused by the sizing rule.
        let cols = vec![seq_column("input_ids", &[&[1, 2, 3]])];
        let err = collate(
            cols,
            &plan(vec![group(Strategy::MaxLength(1 << 45), false)]),
        );
        assert!(
            matches!(err, Err(CollateError::NotEnoughMemory { ref key, ref shape, .. })
                if key == "input_ids" && shape == &[1, 1 << 45]),
            "{err:?}"
        );
    }

    #[test]
    fn nan_and_infinity_never_become_integers() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e19, -1e30] {
            let mut f = Column::new("labels");
            f.push_int(1);
            f.end_row(Shape::Scalar).unwrap();
            f.push_float(bad);
            f.end_row(Shape::Scalar).unwrap();
            let mut p = plan(vec![]);
            p.dtypes.insert("labels".into(), DType::I64);
            let err = collate(vec![f], &p).unwrap_err();
            assert!(
                matches!(err, CollateError::NotAnInteger { row: 1, .. }),
                "{bad}: {err:?}"
            );
        }
    }

    #[test]
    fn large_ints_stay_exact_beside_floats() {
        let big = (1_i64 << 53) + 1;
        let mut c = Column::new("x");
        c.extend_ints([big, i64::MAX, i64::MIN]);
        c.end_row(Shape::Sequence).unwrap();
        c.extend_floats([0.5, -2.5, 3.0]);
        c.end_row(Shape::Sequence).unwrap();
        let mut p = plan(vec![]);
        p.dtypes.insert("x".into(), DType::I64);
        let out = collate(vec![c.clone()], &p).unwrap();
        assert_eq!(
            out[0].data,
            Data::I64(vec![big, i64::MAX, i64::MIN, 0, -2, 3])
        );
        // f32 from the integer itself, not from its f64 rounding.
        let out = collate(vec![c], &plan(vec![])).unwrap();
        let Data::F32(values) = &out[0].data else {
            panic!("not f32")
        };
        assert_eq!(values[0], big as f32);
        assert_eq!(values[1], i64::MAX as f32);
    }

    #[test]
    fn attention_mask_marks_each_rows_values_on_its_side() {
        assert_eq!(
            attention_mask("m", &[2, 0, 3], 4, false).unwrap(),
            vec![1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0]
        );
        assert_eq!(
            attention_mask("m", &[2, 0, 3], 3, true).unwrap(),
            vec![0, 1, 1, 0, 0, 0, 1, 1, 1]
        );
        assert!(matches!(
            attention_mask("m", &[5], 4, false),
            Err(CollateError::TooLong { row: 0, .. })
        ));
    }

    #[test]
    fn position_ids_count_each_row_from_zero_and_pad_with_zero() {
        assert_eq!(
            position_ids("p", &[2, 0, 3], 4).unwrap(),
            [0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0]
        );
        assert_eq!(position_ids("p", &[1], 1).unwrap(), [0]);
        assert!(matches!(
            position_ids("p", &[5], 4),
            Err(CollateError::TooLong { row: 0, .. })
        ));
    }
}
