//! Gathering rows straight from Arrow buffers (a `datasets.Dataset`'s storage) into columns.
//!
//! An Arrow column is a list of chunks; each chunk is a list array (offsets into a flat values
//! buffer) or a primitive array (one value per row), with optional validity bitmaps. A batch
//! names rows of the whole column; [`ArrowColumn::gather`] finds each row's chunk, checks it for
//! nulls and copies its values into a [`Column`], the same column the Python-row reader builds,
//! so `pad::collate` gives the same output either way. [`pad_batch`] pads a batch that way,
//! except that integer sequences padded into int64 skip the column: their values are written
//! from the Arrow buffers straight into the padded buffer.

use std::fmt;

use crate::core::column::{Column, Kind, Shape};
use crate::core::error::CollateError;
use crate::core::pad::{self, DType, Data, Output, Plan, Slots};

#[derive(Debug, Clone, PartialEq)]
pub enum ArrowError {
    /// A row (position None) or a value inside a row's sequence is null.
    Null {
        key: String,
        row: usize,
        index: usize,
        position: Option<usize>,
    },
    /// A requested index outside the dataset.
    OutOfRange {
        index: i64,
        rows: usize,
    },
    /// An unsigned value above int64's range.
    Overflow {
        key: String,
        row: usize,
        index: usize,
        position: usize,
    },
    /// Buffers that do not describe a valid Arrow array (checked once, when a column is built).
    Invalid {
        key: String,
        message: String,
    },
    Collate(CollateError),
}

impl fmt::Display for ArrowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArrowError::Null {
                key,
                row,
                index,
                position: None,
            } => write!(
                f,
                "'{key}' is null (None) in row {row} of the batch (dataset index {index}); rows \
                 with missing values cannot be padded: fill or filter them out first"
            ),
            ArrowError::Null {
                key,
                row,
                index,
                position: Some(position),
            } => write!(
                f,
                "'{key}' holds a null (None) at position {position} in row {row} of the batch \
                 (dataset index {index}); sequences with missing values cannot be padded: fill \
                 or filter them out first"
            ),
            ArrowError::OutOfRange { index, rows } => write!(
                f,
                "index {index} is out of range for a dataset of {rows} rows"
            ),
            ArrowError::Overflow {
                key,
                row,
                index,
                position,
            } => write!(
                f,
                "'{key}' in row {row} of the batch (dataset index {index}) holds an integer at \
                 position {position} that does not fit in int64"
            ),
            ArrowError::Invalid { key, message } => {
                write!(f, "the Arrow buffers of '{key}' are not valid: {message}")
            }
            ArrowError::Collate(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for ArrowError {}

impl From<CollateError> for ArrowError {
    fn from(err: CollateError) -> Self {
        ArrowError::Collate(err)
    }
}

pub type Result<T> = std::result::Result<T, ArrowError>;

/// A bit-packed Arrow bitmap (least significant bit first) starting at bit `offset`.
#[derive(Debug, Clone, Copy)]
pub struct Bitmap<'a> {
    pub bits: &'a [u8],
    pub offset: usize,
}

impl Bitmap<'_> {
    fn covers(&self, len: usize) -> bool {
        (self.offset + len).div_ceil(8) <= self.bits.len()
    }

    /// Bit `i`; callers check `covers` once, so indexing cannot fail.
    fn get(&self, i: usize) -> bool {
        let bit = self.offset + i;
        self.bits[bit / 8] >> (bit % 8) & 1 == 1
    }
}

/// A chunk's flat values: every numeric Arrow type datasets stores.
#[derive(Debug, Clone, Copy)]
pub enum Values<'a> {
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    /// IEEE half floats, as raw bits.
    F16(&'a [u16]),
    F32(&'a [f32]),
    F64(&'a [f64]),
    /// Arrow booleans are bit-packed.
    Bool {
        bits: Bitmap<'a>,
        len: usize,
    },
}

impl Values<'_> {
    pub fn len(&self) -> usize {
        match self {
            Values::I8(v) => v.len(),
            Values::I16(v) => v.len(),
            Values::I32(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::U8(v) => v.len(),
            Values::U16(v) | Values::F16(v) => v.len(),
            Values::U32(v) => v.len(),
            Values::U64(v) => v.len(),
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
            Values::Bool { len, .. } => *len,
        }
    }

    fn is_float(&self) -> bool {
        matches!(self, Values::F16(_) | Values::F32(_) | Values::F64(_))
    }

    /// Whether every value of this type fits in int64 (every integer type but uint64).
    fn fits_int64(&self) -> bool {
        matches!(
            self,
            Values::I8(_)
                | Values::I16(_)
                | Values::I32(_)
                | Values::I64(_)
                | Values::U8(_)
                | Values::U16(_)
                | Values::U32(_)
        )
    }

    /// Appends values `start..end` to `out`, widened to int64; false (nothing written) for a
    /// type that is not `fits_int64`.
    fn append_int64(&self, start: usize, end: usize, out: &mut Slots<'_, i64>) -> bool {
        match self {
            Values::I8(v) => out.extend_widened(&v[start..end]),
            Values::I16(v) => out.extend_widened(&v[start..end]),
            Values::I32(v) => out.extend_widened(&v[start..end]),
            Values::I64(v) => out.extend_from_slice(&v[start..end]),
            Values::U8(v) => out.extend_widened(&v[start..end]),
            Values::U16(v) => out.extend_widened(&v[start..end]),
            Values::U32(v) => out.extend_widened(&v[start..end]),
            _ => return false,
        }
        true
    }

    /// Asks the CPU to start loading values `start..end` into its cache (at most
    /// `PREFETCH_BYTES` of them), so that a later read of them finds them there rather than
    /// waiting for memory: a batch's rows lie scattered over the table (a shuffled sampler), and
    /// a row of a few hundred values is too short for the hardware's own prefetcher to get
    /// ahead of. Only a hint: nothing is read, and out of range asks for nothing.
    fn prefetch(&self, start: usize, end: usize) {
        match self {
            Values::I8(v) => prefetch_values(v.get(start..end)),
            Values::I16(v) => prefetch_values(v.get(start..end)),
            Values::I32(v) => prefetch_values(v.get(start..end)),
            Values::I64(v) => prefetch_values(v.get(start..end)),
            Values::U8(v) => prefetch_values(v.get(start..end)),
            Values::U16(v) | Values::F16(v) => prefetch_values(v.get(start..end)),
            Values::U32(v) => prefetch_values(v.get(start..end)),
            Values::U64(v) => prefetch_values(v.get(start..end)),
            Values::F32(v) => prefetch_values(v.get(start..end)),
            Values::F64(v) => prefetch_values(v.get(start..end)),
            Values::Bool { .. } => {}
        }
    }

    /// Appends values `start..end` to `column`. Only u64 can fail (values above i64::MAX).
    fn append(
        &self,
        column: &mut Column,
        start: usize,
        end: usize,
    ) -> std::result::Result<(), usize> {
        // An empty row adds nothing, so it leaves the column's kind as it was: Python's `[]` says
        // nothing about the dtype either, and the row path must give the same output.
        if start == end {
            return Ok(());
        }
        match self {
            Values::I8(v) => column.extend_ints(v[start..end].iter().map(|&x| i64::from(x))),
            Values::I16(v) => column.extend_ints(v[start..end].iter().map(|&x| i64::from(x))),
            Values::I32(v) => column.extend_ints(v[start..end].iter().map(|&x| i64::from(x))),
            Values::I64(v) => column.extend_ints(v[start..end].iter().copied()),
            Values::U8(v) => column.extend_ints(v[start..end].iter().map(|&x| i64::from(x))),
            Values::U16(v) => column.extend_ints(v[start..end].iter().map(|&x| i64::from(x))),
            Values::U32(v) => column.extend_ints(v[start..end].iter().map(|&x| i64::from(x))),
            Values::U64(v) => {
                let slice = &v[start..end];
                if let Some(position) = slice.iter().position(|&x| i64::try_from(x).is_err()) {
                    return Err(position);
                }
                column.extend_ints(slice.iter().map(|&x| x as i64));
            }
            Values::F16(v) => column.extend_floats(v[start..end].iter().map(|&x| f16_to_f64(x))),
            Values::F32(v) => column.extend_floats(v[start..end].iter().map(|&x| f64::from(x))),
            Values::F64(v) => column.extend_floats(v[start..end].iter().copied()),
            Values::Bool { bits, .. } => column.extend_bools((start..end).map(|i| bits.get(i))),
        }
        if self.is_float() {
            // A dataset hands these rows out as lists of Python floats.
            column.mark_python_floats();
        }
        Ok(())
    }
}

/// Exact conversion of an IEEE 754 half float (subnormals, infinities and NaN included).
pub fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let fraction = f64::from(bits & 0x3ff);
    match exponent {
        0 => sign * fraction * 2f64.powi(-24),
        0x1f if fraction == 0.0 => sign * f64::INFINITY,
        0x1f => f64::NAN,
        _ => sign * (1.0 + fraction / 1024.0) * 2f64.powi(exponent - 15),
    }
}

/// A list array's offsets: row r's values are `offsets[r]..offsets[r + 1]`.
#[derive(Debug, Clone, Copy)]
pub enum Offsets<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
}

impl Offsets<'_> {
    fn len(&self) -> usize {
        match self {
            Offsets::I32(o) => o.len(),
            Offsets::I64(o) => o.len(),
        }
    }

    fn get(&self, i: usize) -> i64 {
        match self {
            Offsets::I32(o) => i64::from(o[i]),
            Offsets::I64(o) => o[i],
        }
    }
}

/// One Arrow array of a column, validated so that reading any of its rows cannot go out of
/// bounds.
#[derive(Debug, Clone)]
pub struct Chunk<'a> {
    rows: usize,
    /// None: a primitive array, one value per row.
    offsets: Option<Offsets<'a>>,
    values: Values<'a>,
    /// Row validity (bit set: present).
    validity: Option<Bitmap<'a>>,
    /// Validity of the values inside the sequences.
    value_validity: Option<Bitmap<'a>>,
}

impl<'a> Chunk<'a> {
    /// A list chunk (`offsets` given, `rows + 1` of them) or a primitive chunk (`offsets` None).
    /// The buffers are checked here once, so gathering from the chunk never indexes out of
    /// bounds: offsets must start at 0 or more, never decrease and end within the values.
    pub fn new(
        key: &str,
        rows: usize,
        offsets: Option<Offsets<'a>>,
        values: Values<'a>,
        validity: Option<Bitmap<'a>>,
        value_validity: Option<Bitmap<'a>>,
    ) -> Result<Self> {
        let invalid = |message: String| ArrowError::Invalid {
            key: key.into(),
            message,
        };
        match offsets {
            Some(offsets) => {
                if offsets.len() != rows + 1 {
                    return Err(invalid(format!(
                        "{} offsets for {rows} rows (expected {})",
                        offsets.len(),
                        rows + 1
                    )));
                }
                let mut previous = offsets.get(0);
                if previous < 0 {
                    return Err(invalid(format!("negative offset {previous}")));
                }
                for i in 1..=rows {
                    let next = offsets.get(i);
                    if next < previous {
                        return Err(invalid(format!("offsets decrease at row {i}")));
                    }
                    previous = next;
                }
                if previous as u64 > values.len() as u64 {
                    return Err(invalid(format!(
                        "offsets reach {previous} but there are {} values",
                        values.len()
                    )));
                }
            }
            None if values.len() < rows => {
                return Err(invalid(format!("{} values for {rows} rows", values.len())));
            }
            None => {}
        }
        if let Values::Bool { bits, len } = values {
            if !bits.covers(len) {
                return Err(invalid("the boolean values bitmap is too short".into()));
            }
        }
        if validity.is_some_and(|v| !v.covers(rows)) {
            return Err(invalid("the validity bitmap is too short".into()));
        }
        if value_validity.is_some_and(|v| !v.covers(values.len())) {
            return Err(invalid("the values' validity bitmap is too short".into()));
        }
        Ok(Chunk {
            rows,
            offsets,
            values,
            validity,
            value_validity,
        })
    }

    fn span(&self, row: usize) -> (usize, usize) {
        match self.offsets {
            // In range and non-negative: checked in `new`.
            Some(offsets) => (offsets.get(row) as usize, offsets.get(row + 1) as usize),
            None => (row, row + 1),
        }
    }
}

/// A whole column: its chunks and the first row of each.
#[derive(Debug, Clone)]
pub struct ArrowColumn<'a> {
    key: String,
    chunks: Vec<Chunk<'a>>,
    /// `starts[c]` is chunk c's first row; the last entry is the number of rows.
    starts: Vec<usize>,
    shape: Shape,
}

impl<'a> ArrowColumn<'a> {
    /// All chunks must be list chunks (a sequence column) or all primitive (a scalar column).
    pub fn new(key: impl Into<String>, chunks: Vec<Chunk<'a>>) -> Result<Self> {
        let key = key.into();
        let is_list = chunks.first().is_some_and(|c| c.offsets.is_some());
        if chunks.iter().any(|c| c.offsets.is_some() != is_list) {
            return Err(ArrowError::Invalid {
                key,
                message: "some chunks are lists and others are not".into(),
            });
        }
        let mut starts = Vec::with_capacity(chunks.len() + 1);
        let mut total = 0;
        for chunk in &chunks {
            starts.push(total);
            total += chunk.rows;
        }
        starts.push(total);
        Ok(ArrowColumn {
            key,
            chunks,
            starts,
            shape: if is_list {
                Shape::Sequence
            } else {
                Shape::Scalar
            },
        })
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Whether the column holds sequences of integers of a type int64 holds (every integer
    /// type but uint64: no value can overflow), in every chunk.
    fn holds_int64_sequences(&self) -> bool {
        self.shape == Shape::Sequence && self.chunks.iter().all(|chunk| chunk.values.fits_int64())
    }

    pub fn rows(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    /// (chunk, row within the chunk) of table row `row`, which must be below `rows()`.
    fn locate(&self, row: usize) -> (usize, usize) {
        // Chunk c holds rows starts[c]..starts[c + 1]; empty chunks are skipped over because
        // partition_point finds the last start at or below `row`.
        let chunk = self.starts.partition_point(|&s| s <= row) - 1;
        (chunk, row - self.starts[chunk])
    }

    /// Where rows `table_rows` (already checked against `rows()`) hold their values, in
    /// order, each checked for nulls, and how many values they hold together. `indices[i]` is
    /// the dataset index of batch row i, for error messages.
    fn spans(&self, table_rows: &[usize], indices: &[usize]) -> Result<(Vec<Span>, usize)> {
        let mut spans = Vec::with_capacity(table_rows.len());
        let mut total = 0;
        for (row, &table_row) in table_rows.iter().enumerate() {
            let (c, local) = self.locate(table_row);
            let chunk = &self.chunks[c];
            let index = indices.get(row).copied().unwrap_or(table_row);
            if chunk.validity.is_some_and(|v| !v.get(local)) {
                return Err(ArrowError::Null {
                    key: self.key.clone(),
                    row,
                    index,
                    position: None,
                });
            }
            let (start, end) = chunk.span(local);
            if let Some(validity) = chunk.value_validity {
                if let Some(i) = (start..end).find(|&i| !validity.get(i)) {
                    return Err(ArrowError::Null {
                        key: self.key.clone(),
                        row,
                        index,
                        position: match self.shape {
                            Shape::Sequence => Some(i - start),
                            Shape::Scalar => None,
                        },
                    });
                }
            }
            total += end - start;
            spans.push((c, start, end));
        }
        Ok((spans, total))
    }

    /// Copies rows `table_rows` (already checked against `rows()`) into a column, in order.
    /// `indices[i]` is the dataset index of batch row i, for error messages.
    pub fn gather(&self, table_rows: &[usize], indices: &[usize]) -> Result<Column> {
        // First find each row's values and check them for nulls, to size the column once.
        let (spans, total) = self.spans(table_rows, indices)?;
        let is_float = self.chunks.iter().any(|c| c.values.is_float());
        let mut column = Column::with_capacity(
            self.key.clone(),
            table_rows.len(),
            if is_float { 0 } else { total },
        );
        if is_float {
            column.floats.reserve(total);
        }
        for (row, (c, start, end)) in spans.into_iter().enumerate() {
            if let Err(position) = self.chunks[c].values.append(&mut column, start, end) {
                return Err(ArrowError::Overflow {
                    key: self.key.clone(),
                    row,
                    index: indices.get(row).copied().unwrap_or(0),
                    position,
                });
            }
            column.end_row(self.shape)?;
        }
        Ok(column)
    }

    /// The values of a scalar integer column at `table_rows` (datasets' indices mapping).
    pub fn integers(&self, table_rows: &[usize], indices: &[usize]) -> Result<Vec<i64>> {
        let column = self.gather(table_rows, indices)?;
        if column.shape == Some(Shape::Sequence)
            || column.kind == Some(crate::core::column::Kind::Float)
        {
            return Err(ArrowError::Invalid {
                key: self.key.clone(),
                message: "an indices mapping must hold one integer per row".into(),
            });
        }
        Ok(column.ints)
    }
}

/// Python-style indices (negative counts from the end) -> rows, checked against `rows`.
pub fn resolve_indices(indices: &[i64], rows: usize) -> Result<Vec<usize>> {
    indices
        .iter()
        .map(|&index| {
            let resolved = if index < 0 {
                index.checked_add(rows as i64)
            } else {
                Some(index)
            };
            match resolved {
                Some(r) if r >= 0 && (r as u64) < rows as u64 => Ok(r as usize),
                _ => Err(ArrowError::OutOfRange { index, rows }),
            }
        })
        .collect()
}

/// A batch from Arrow columns padded by `plan`: `indices` are dataset positions, mapped
/// through `index_map` (datasets' indices mapping after shuffle/select/filter) when there is
/// one. The same outputs and errors as each column gathered into a `Column` and then
/// `pad::collate` (the tests' `gather_batch`), except that a
/// column of integer sequences whose type int64 holds (every integer type but uint64) and
/// that is padded into an int64 output is written from its Arrow buffers straight into that
/// output's padded buffer: one copy of each value, not a gathered column and then the padded
/// buffer. Such a column is gathered as its rows' lengths alone; where its output is not
/// padded int64 (a dtype the plan names, an unpadded stack), its values are gathered after
/// all, before that output is written.
pub fn pad_batch(
    columns: &[&ArrowColumn<'_>],
    index_map: Option<&ArrowColumn<'_>>,
    indices: &[i64],
    plan: &Plan,
) -> Result<Vec<Output>> {
    let (rows, positions) = batch_rows(columns, index_map, indices)?;
    let mut in_place = Vec::with_capacity(columns.len());
    let mut gathered = Vec::with_capacity(columns.len());
    for column in columns {
        if column.holds_int64_sequences() {
            let (spans, _) = column.spans(&rows, &positions)?;
            let source = InPlace { column, spans };
            gathered.push(source.lengths_only());
            in_place.push(Some(source));
        } else {
            gathered.push(column.gather(&rows, &positions)?);
            in_place.push(None);
        }
    }
    let planned = pad::plan_outputs(gathered, plan)?;
    Ok(planned.fill_with(|index, column, output| {
        // Outputs past the columns (a created attention mask) have no source here.
        let Some(Some(source)) = in_place.get(index) else {
            return Ok(None);
        };
        if let (DType::I64, Some(width)) = (output.dtype, output.width()) {
            let lengths = column.lengths();
            let written = pad::fill_in_place(
                &output.key,
                &lengths,
                width,
                output.pad_value(),
                output.left(),
                |row, out| source.append_row(row, out),
            )?;
            if let Some(values) = written {
                return Ok(Some(Data::I64(values)));
            }
        }
        source.gather_values(column);
        Ok(None)
    })?)
}

/// How far ahead of the row being written `InPlace::append_row` asks for a row's values, and
/// how many of a row's bytes it asks for at most (`Values::prefetch`).
const PREFETCH_ROWS: usize = 2;
const PREFETCH_BYTES: usize = 4096;
const CACHE_LINE: usize = 64;

/// Asks for the cache lines of `values` (None: nothing), at most `PREFETCH_BYTES` of them.
fn prefetch_values<T>(values: Option<&[T]>) {
    let Some(values) = values else {
        return;
    };
    let bytes = size_of_val(values).min(PREFETCH_BYTES);
    let base = values.as_ptr().cast::<u8>();
    for offset in (0..bytes).step_by(CACHE_LINE) {
        prefetch_line(base.wrapping_add(offset));
    }
}

/// Asks the CPU to load the cache line holding `address` (a hint: nothing is read).
#[inline(always)]
fn prefetch_line(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and cannot fault, whatever the address; SSE, which it
    // needs, is part of every x86_64 target.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Where a batch row's values sit: (chunk, start, end) in that chunk's values.
type Span = (usize, usize, usize);

/// A column of integer sequences read where they are (see `pad_batch`): its rows' spans,
/// checked for nulls.
struct InPlace<'c, 'a> {
    column: &'c ArrowColumn<'a>,
    spans: Vec<Span>,
}

impl InPlace<'_, '_> {
    /// The column `gather` makes of these rows, without its values: the same offsets, shape
    /// and kind (an int column once a row holds a value).
    fn lengths_only(&self) -> Column {
        let mut column = Column::with_capacity(self.column.key.clone(), self.spans.len(), 0);
        let mut end = 0;
        for &(_, start, stop) in &self.spans {
            end += stop - start;
            column.offsets.push(end);
        }
        if !self.spans.is_empty() {
            column.shape = Some(Shape::Sequence);
        }
        if end > 0 {
            column.kind = Some(Kind::Int);
        }
        column
    }

    /// Row `row`'s values appended to `out`, widened to int64 (`Values::append_int64`), once
    /// the load of the row `PREFETCH_ROWS` ahead has been asked for (`Values::prefetch`).
    fn append_row(&self, row: usize, out: &mut Slots<'_, i64>) -> bool {
        if let Some(&(chunk, start, end)) = self.spans.get(row + PREFETCH_ROWS) {
            self.column.chunks[chunk].values.prefetch(start, end);
        }
        self.spans.get(row).is_some_and(|&(chunk, start, end)| {
            self.column.chunks[chunk]
                .values
                .append_int64(start, end, out)
        })
    }

    /// The values `lengths_only` left out, put into `column` as `gather` puts them.
    fn gather_values(&self, column: &mut Column) {
        for &(chunk, start, end) in &self.spans {
            // Never an error: no uint64 here (`holds_int64_sequences`).
            let _ = self.column.chunks[chunk].values.append(column, start, end);
        }
    }
}

/// The table rows of dataset positions `indices` (through `index_map` when there is one),
/// and the positions themselves, checked.
fn batch_rows(
    columns: &[&ArrowColumn<'_>],
    index_map: Option<&ArrowColumn<'_>>,
    indices: &[i64],
) -> Result<(Vec<usize>, Vec<usize>)> {
    let table_rows = columns.first().map(|c| c.rows()).unwrap_or(0);
    if let Some(column) = columns.iter().find(|c| c.rows() != table_rows) {
        return Err(ArrowError::Invalid {
            key: column.key.clone(),
            message: format!(
                "{} rows, but the first column has {table_rows}",
                column.rows()
            ),
        });
    }
    let dataset_rows = index_map.map_or(table_rows, |m| m.rows());
    let positions = resolve_indices(indices, dataset_rows)?;
    let rows = match index_map {
        None => positions.clone(),
        Some(map) => map
            .integers(&positions, &positions)?
            .into_iter()
            .zip(&positions)
            .map(|(row, &position)| match usize::try_from(row) {
                Ok(r) if r < table_rows => Ok(r),
                _ => Err(ArrowError::Invalid {
                    key: map.key.clone(),
                    message: format!(
                        "dataset index {position} maps to row {row}, outside the table's \
                         {table_rows} rows"
                    ),
                }),
            })
            .collect::<Result<Vec<_>>>()?,
    };
    Ok((rows, positions))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::core::pad::{Follower, PadGroup, Strategy};

    fn list_chunk<'a>(offsets: &'a [i32], values: Values<'a>) -> Chunk<'a> {
        Chunk::new(
            "x",
            offsets.len() - 1,
            Some(Offsets::I32(offsets)),
            values,
            None,
            None,
        )
        .unwrap()
    }

    #[test]
    fn gathers_rows_across_chunks_in_request_order() {
        let a = [1i32, 2, 3, 4, 5];
        let b = [10i64, 20, 30];
        let column = ArrowColumn::new(
            "input_ids",
            vec![
                list_chunk(&[0, 2, 2, 5], Values::I32(&a)),
                Chunk::new(
                    "input_ids",
                    2,
                    Some(Offsets::I64(&[1, 2, 3])),
                    Values::I64(&b),
                    None,
                    None,
                )
                .unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(column.rows(), 5);
        let gathered = column.gather(&[4, 0, 1, 2], &[4, 0, 1, 2]).unwrap();
        assert_eq!(gathered.ints, vec![30, 1, 2, 3, 4, 5]);
        assert_eq!(gathered.lengths(), vec![1, 2, 0, 3]);
        assert_eq!(gathered.shape, Some(Shape::Sequence));
    }

    #[test]
    fn empty_chunks_are_skipped_when_locating_rows() {
        let v = [7i64, 8];
        let empty: [i64; 0] = [];
        let column = ArrowColumn::new(
            "label",
            vec![
                Chunk::new("label", 0, None, Values::I64(&empty), None, None).unwrap(),
                Chunk::new("label", 1, None, Values::I64(&v[..1]), None, None).unwrap(),
                Chunk::new("label", 0, None, Values::I64(&empty), None, None).unwrap(),
                Chunk::new("label", 1, None, Values::I64(&v[1..]), None, None).unwrap(),
            ],
        )
        .unwrap();
        let gathered = column.gather(&[1, 0], &[1, 0]).unwrap();
        assert_eq!(gathered.ints, vec![8, 7]);
        assert_eq!(gathered.shape, Some(Shape::Scalar));
    }

    #[test]
    fn empty_rows_leave_the_kind_unset_like_empty_python_lists() {
        let v = [0.5f32];
        let column =
            ArrowColumn::new("x", vec![list_chunk(&[0, 0, 0, 1], Values::F32(&v))]).unwrap();
        let empty = column.gather(&[0, 1], &[0, 1]).unwrap();
        assert_eq!(empty.kind, None);
        assert_eq!(empty.first_python_float_row, None);
        let with_value = column.gather(&[0, 2], &[0, 2]).unwrap();
        assert_eq!(with_value.kind, Some(Kind::Float));
        assert_eq!(with_value.floats, vec![0.5]);
        // A dataset hands Arrow floats out as Python floats: noted with their row.
        assert_eq!(with_value.first_python_float_row, Some(1));
    }

    #[test]
    fn booleans_are_read_from_bits_with_their_offset() {
        // Bits from bit 3: 1, 0, 1, 1.
        let bits = [0b0110_1000u8];
        let column = ArrowColumn::new(
            "mask",
            vec![list_chunk(
                &[0, 3, 4],
                Values::Bool {
                    bits: Bitmap {
                        bits: &bits,
                        offset: 3,
                    },
                    len: 4,
                },
            )],
        )
        .unwrap();
        let gathered = column.gather(&[1, 0], &[1, 0]).unwrap();
        assert_eq!(gathered.kind, Some(Kind::Bool));
        assert_eq!(gathered.ints, vec![1, 1, 0, 1]);
    }

    #[test]
    fn null_rows_and_null_values_name_key_row_and_index() {
        let v = [1i32, 2, 3];
        let validity = [0b101u8];
        let chunk = Chunk::new(
            "input_ids",
            3,
            Some(Offsets::I32(&[0, 1, 2, 3])),
            Values::I32(&v),
            Some(Bitmap {
                bits: &validity,
                offset: 0,
            }),
            None,
        )
        .unwrap();
        let column = ArrowColumn::new("input_ids", vec![chunk]).unwrap();
        assert!(column.gather(&[0, 2], &[0, 2]).is_ok());
        let err = column.gather(&[2, 1], &[7, 9]).unwrap_err();
        assert_eq!(
            err,
            ArrowError::Null {
                key: "input_ids".into(),
                row: 1,
                index: 9,
                position: None
            }
        );
        assert!(err.to_string().contains("'input_ids' is null"));

        let value_validity = [0b1011u8];
        let chunk = Chunk::new(
            "ids",
            1,
            Some(Offsets::I32(&[0, 4])),
            Values::I32(&[1, 2, 3, 4]),
            None,
            Some(Bitmap {
                bits: &value_validity,
                offset: 0,
            }),
        )
        .unwrap();
        let column = ArrowColumn::new("ids", vec![chunk]).unwrap();
        let err = column.gather(&[0], &[5]).unwrap_err();
        assert_eq!(
            err,
            ArrowError::Null {
                key: "ids".into(),
                row: 0,
                index: 5,
                position: Some(2)
            }
        );
    }

    #[test]
    fn bad_buffers_are_rejected_when_the_chunk_is_built() {
        let v = [1i32, 2];
        for offsets in [&[0, 3][..], &[0, 2, 1], &[-1, 0], &[0]] {
            let rows = 1;
            assert!(
                Chunk::new(
                    "x",
                    rows,
                    Some(Offsets::I32(offsets)),
                    Values::I32(&v),
                    None,
                    None
                )
                .is_err(),
                "{offsets:?}"
            );
        }
        assert!(Chunk::new("x", 3, None, Values::I32(&v), None, None).is_err());
        let short = [0u8];
        assert!(Chunk::new(
            "x",
            9,
            None,
            Values::I32(&[0; 9]),
            Some(Bitmap {
                bits: &short,
                offset: 0
            }),
            None
        )
        .is_err());
    }

    #[test]
    fn u64_above_i64_is_an_overflow_error() {
        let v = [1u64, u64::MAX];
        let column = ArrowColumn::new("x", vec![list_chunk(&[0, 1, 2], Values::U64(&v))]).unwrap();
        assert_eq!(column.gather(&[0], &[0]).unwrap().ints, vec![1]);
        assert!(matches!(
            column.gather(&[0, 1], &[0, 1]),
            Err(ArrowError::Overflow {
                row: 1,
                position: 0,
                ..
            })
        ));
    }

    #[test]
    fn half_floats_convert_exactly() {
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert_eq!(f16_to_f64(0x7bff), 65504.0);
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert_eq!(f16_to_f64(0x7c00), f64::INFINITY);
        assert!(f16_to_f64(0x7e00).is_nan());
        assert_eq!(f16_to_f64(0x8000), 0.0);
        assert!(f16_to_f64(0x8000).is_sign_negative());
    }

    /// The plain route `pad_batch` must equal: every column gathered, then padded.
    fn gather_batch(
        columns: &[&ArrowColumn<'_>],
        index_map: Option<&ArrowColumn<'_>>,
        indices: &[i64],
    ) -> Result<Vec<Column>> {
        let (rows, positions) = batch_rows(columns, index_map, indices)?;
        columns
            .iter()
            .map(|column| column.gather(&rows, &positions))
            .collect()
    }

    fn gathered_then_padded(
        columns: &[&ArrowColumn<'_>],
        index_map: Option<&ArrowColumn<'_>>,
        indices: &[i64],
        plan: &Plan,
    ) -> Result<Vec<Output>> {
        let gathered = gather_batch(columns, index_map, indices)?;
        Ok(pad::collate(gathered, plan)?)
    }

    fn pad_plan(strategy: Strategy, left: bool, mask: bool) -> Plan {
        Plan {
            groups: vec![PadGroup {
                lead: "input_ids".into(),
                lead_pad_value: 9,
                strategy,
                pad_to_multiple_of: None,
                left,
                followers: vec![Follower {
                    key: "token_type_ids".into(),
                    pad_value: 7,
                    same_length_as_lead: true,
                }],
                attention_mask: mask.then(|| "attention_mask".into()),
                integer_lead: true,
            }],
            float_dtype: DType::F32,
            allow_ragged: false,
            dtypes: HashMap::new(),
        }
    }

    #[test]
    fn padding_in_place_gives_what_gathering_then_padding_gives() {
        // Every integer type int64 holds, across chunks; empty rows; a scalar label; an
        // indices mapping.
        let ids_a = [1i32, 2, 3, 4, 5];
        let ids_b = [-6i8, 7];
        let types_a = [0u8, 1, 0, 1, 1];
        let types_b = [65_535u16, 0];
        let labels = [1u32, 0, 4_000_000_000, 2];
        let ids = ArrowColumn::new(
            "input_ids",
            vec![
                list_chunk(&[0, 2, 2, 5], Values::I32(&ids_a)),
                list_chunk(&[0, 2], Values::I8(&ids_b)),
            ],
        )
        .unwrap();
        let types = ArrowColumn::new(
            "token_type_ids",
            vec![
                list_chunk(&[0, 2, 2, 5], Values::U8(&types_a)),
                list_chunk(&[0, 2], Values::U16(&types_b)),
            ],
        )
        .unwrap();
        let label = ArrowColumn::new(
            "label",
            vec![Chunk::new("label", 4, None, Values::U32(&labels), None, None).unwrap()],
        )
        .unwrap();
        let map_values = [3i64, 0, 1, 2];
        let map = ArrowColumn::new(
            "indices",
            vec![Chunk::new("indices", 4, None, Values::I64(&map_values), None, None).unwrap()],
        )
        .unwrap();
        let columns = [&ids, &types, &label];
        let mut float_types = pad_plan(Strategy::Longest, false, true);
        float_types
            .dtypes
            .insert("token_type_ids".into(), DType::F32);
        let plans = [
            pad_plan(Strategy::Longest, false, true),
            pad_plan(Strategy::Longest, true, false),
            pad_plan(Strategy::MaxLength(6), true, true),
            pad_plan(Strategy::MaxLength(2), false, true), // a row too long
            pad_plan(Strategy::DoNotPad, false, true),     // ragged: an error
            float_types,
        ];
        let batches: [&[i64]; 5] = [&[0, 1, 2, 3], &[3, 1], &[1], &[2, 2, -1], &[0, 3]];
        for plan in &plans {
            for indices in batches {
                for index_map in [None, Some(&map)] {
                    assert_eq!(
                        pad_batch(&columns, index_map, indices, plan),
                        gathered_then_padded(&columns, index_map, indices, plan),
                        "{plan:?} {indices:?}"
                    );
                }
            }
        }
        // Rows of one length, stacked without padding (an output that is not padded int64:
        // its values are gathered after all).
        let mut unpadded = pad_plan(Strategy::DoNotPad, false, true);
        unpadded.allow_ragged = true;
        for indices in [&[0i64, 2][..], &[1, 1], &[0, 1, 2, 3]] {
            assert_eq!(
                pad_batch(&columns, None, indices, &unpadded),
                gathered_then_padded(&columns, None, indices, &unpadded)
            );
        }
        let padded = pad_batch(&columns, None, &[0, 1], &plans[0]).unwrap();
        assert_eq!(padded[0].data, Data::I64(vec![1, 2, 9, 9]));
    }

    #[test]
    fn prefetching_a_span_past_the_values_asks_for_nothing_and_never_panics() {
        let ints = [1i64, 2, 3];
        let bytes = [1u8; 5000];
        let bits = [0b101u8];
        let values = [
            Values::I64(&ints),
            Values::U8(&bytes),
            Values::Bool {
                bits: Bitmap {
                    bits: &bits,
                    offset: 0,
                },
                len: 3,
            },
        ];
        for v in &values {
            for (start, end) in [
                (0, 3),
                (0, 4),
                (2, 1),
                (3, 3),
                (usize::MAX, 0),
                (0, usize::MAX),
            ] {
                v.prefetch(start, end);
            }
        }
        // A span longer than PREFETCH_BYTES asks for its first lines only.
        values[1].prefetch(0, bytes.len());
    }

    #[test]
    fn padding_in_place_reports_nulls_and_overflow_as_gathering_does() {
        let ids = [1i64, 2, 3];
        let big = [1u64, u64::MAX];
        let row_bits = [0b101u8];
        let with_null_row = ArrowColumn::new(
            "input_ids",
            vec![Chunk::new(
                "input_ids",
                3,
                Some(Offsets::I32(&[0, 1, 2, 3])),
                Values::I64(&ids),
                Some(Bitmap {
                    bits: &row_bits,
                    offset: 0,
                }),
                None,
            )
            .unwrap()],
        )
        .unwrap();
        let wide = ArrowColumn::new(
            "token_type_ids",
            vec![list_chunk(&[0, 1, 2, 2], Values::U64(&big))],
        )
        .unwrap();
        let plan = pad_plan(Strategy::Longest, false, true);
        for indices in [&[0i64, 2][..], &[1], &[2, 0]] {
            assert_eq!(
                pad_batch(&[&with_null_row, &wide], None, indices, &plan),
                gathered_then_padded(&[&with_null_row, &wide], None, indices, &plan)
            );
        }
        assert!(matches!(
            pad_batch(&[&with_null_row], None, &[1], &plan),
            Err(ArrowError::Null {
                row: 0,
                index: 1,
                ..
            })
        ));
    }

    #[test]
    fn batches_map_through_the_indices_mapping_and_check_ranges() {
        let ids = [1i64, 2, 3];
        let data = ArrowColumn::new(
            "input_ids",
            vec![list_chunk(&[0, 1, 2, 3], Values::I64(&ids))],
        )
        .unwrap();
        let map_values = [2u64, 0];
        let map = ArrowColumn::new(
            "indices",
            vec![Chunk::new("indices", 2, None, Values::U64(&map_values), None, None).unwrap()],
        )
        .unwrap();
        let columns = gather_batch(&[&data], Some(&map), &[1, -1, 0]).unwrap();
        assert_eq!(columns[0].ints, vec![1, 1, 3]);
        assert_eq!(
            gather_batch(&[&data], Some(&map), &[2]).unwrap_err(),
            ArrowError::OutOfRange { index: 2, rows: 2 }
        );
        assert!(gather_batch(&[&data], None, &[-4]).is_err());
        assert_eq!(
            gather_batch(&[&data], None, &[-3]).unwrap()[0].ints,
            vec![1]
        );
    }
}
