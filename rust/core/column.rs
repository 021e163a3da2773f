//! A column: the values of one key across the rows of a batch, stored flat with row offsets.
//!
//! The binding layer fills a column while it walks the Python rows; the padding functions read
//! it with the interpreter released. Values are kept as i64 until a float shows up (bools count
//! as integers but are remembered, so an all-bool column can come back as bool). Once floats
//! arrive, integers that f64 cannot hold exactly (beyond 2**53) are also kept aside, exact, so
//! an integer output still gets them unchanged and a float output rounds them once, from the
//! integer, as numpy and torch do.
//!
//! An integer beyond int64 (a Python int, a numpy uint64) is kept as its correctly rounded f64
//! in `unfit_ints`; an integer column holds a placeholder in its place. Its error is deferred:
//! a float output uses the value (as torch.tensor and np.asarray take it in a list holding a
//! float), an integer or bool output fails with `Overflow` naming the first such integer.

use crate::core::error::{CollateError, Result};

/// What a column holds, in promotion order: bool < int < float (as numpy and torch promote).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Bool,
    Int,
    Float,
}

/// Whether each row holds one number or a flat sequence of numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Scalar,
    Sequence,
}

/// An integer beyond int64 in a column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnfitInt {
    /// Its index into `ints` or `floats`.
    pub index: usize,
    /// Its correctly rounded f64.
    pub value: f64,
    /// Whether it fits in uint64 (numpy makes an object array of a list with one that does not).
    pub fits_u64: bool,
}

#[derive(Debug, Clone)]
pub struct Column {
    pub key: String,
    /// None until the first value (or empty sequence) arrives.
    pub kind: Option<Kind>,
    pub shape: Option<Shape>,
    pub ints: Vec<i64>,
    pub floats: Vec<f64>,
    /// In a float column: (index into `floats`, value) of every integer whose f64 is inexact.
    pub exact_ints: Vec<(usize, i64)>,
    /// Every integer beyond int64, in reading order. In an integer column `ints` holds 0 at
    /// its index.
    pub unfit_ints: Vec<UnfitInt>,
    /// `offsets[r]..offsets[r + 1]` are row r's values; `offsets.len() == rows + 1`.
    pub offsets: Vec<usize>,
}

impl Column {
    pub fn new(key: impl Into<String>) -> Self {
        Self::with_capacity(key, 0, 0)
    }

    pub fn with_capacity(key: impl Into<String>, rows: usize, values: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Column {
            key: key.into(),
            kind: None,
            shape: None,
            ints: Vec::with_capacity(values),
            floats: Vec::new(),
            exact_ints: Vec::new(),
            unfit_ints: Vec::new(),
            offsets,
        }
    }

    pub fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn lengths(&self) -> Vec<usize> {
        self.offsets.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn is_float(&self) -> bool {
        self.kind == Some(Kind::Float)
    }

    fn promote(&mut self, kind: Kind) {
        match self.kind {
            None => self.kind = Some(kind),
            Some(current) if kind > current => {
                if kind == Kind::Float {
                    let ints = std::mem::take(&mut self.ints);
                    self.floats.reserve(ints.len());
                    for value in ints {
                        self.push_int_as_float(value);
                    }
                    for unfit in &self.unfit_ints {
                        if let Some(slot) = self.floats.get_mut(unfit.index) {
                            *slot = unfit.value;
                        }
                    }
                }
                self.kind = Some(kind);
            }
            Some(_) => {}
        }
    }

    /// Appends an integer to a float column, remembering it when f64 rounds it.
    fn push_int_as_float(&mut self, value: i64) {
        let float = value as f64;
        // 2**63 is the one f64 that `as i64` saturates from, so it cannot prove a round trip.
        if float >= 9_223_372_036_854_775_808.0 || float as i64 != value {
            self.exact_ints.push((self.floats.len(), value));
        }
        self.floats.push(float);
    }

    pub fn push_int(&mut self, value: i64) {
        self.promote(Kind::Int);
        if self.is_float() {
            self.push_int_as_float(value);
        } else {
            self.ints.push(value);
        }
    }

    /// Appends an integer beyond int64, given as its correctly rounded f64 and whether it fits
    /// in uint64 (see the module comment: an integer output of this column fails naming it).
    pub fn push_unfit_int(&mut self, value: f64, fits_u64: bool) {
        self.promote(Kind::Int);
        let index = self.values_len();
        self.unfit_ints.push(UnfitInt {
            index,
            value,
            fits_u64,
        });
        if self.is_float() {
            self.floats.push(value);
        } else {
            self.ints.push(0);
        }
    }

    pub fn push_bool(&mut self, value: bool) {
        self.promote(Kind::Bool);
        if self.is_float() {
            self.floats.push(f64::from(u8::from(value)));
        } else {
            self.ints.push(i64::from(value));
        }
    }

    pub fn push_float(&mut self, value: f64) {
        self.promote(Kind::Float);
        self.floats.push(value);
    }

    /// Appends many integers at once (numpy / torch rows). An empty batch of values changes
    /// nothing, not even the kind: an empty float array adds no float (as its `tolist()`,
    /// which transformers pads, holds none).
    pub fn extend_ints(&mut self, values: impl IntoIterator<Item = i64>) {
        let mut values = values.into_iter().peekable();
        if values.peek().is_none() {
            return;
        }
        self.promote(Kind::Int);
        if self.is_float() {
            for value in values {
                self.push_int_as_float(value);
            }
        } else {
            self.ints.extend(values);
        }
    }

    pub fn extend_bools(&mut self, values: impl IntoIterator<Item = bool>) {
        let mut values = values.into_iter().peekable();
        if values.peek().is_none() {
            return;
        }
        self.promote(Kind::Bool);
        if self.is_float() {
            self.floats.extend(values.map(|v| f64::from(u8::from(v))));
        } else {
            self.ints.extend(values.map(i64::from));
        }
    }

    pub fn extend_floats(&mut self, values: impl IntoIterator<Item = f64>) {
        let mut values = values.into_iter().peekable();
        if values.peek().is_none() {
            return;
        }
        self.promote(Kind::Float);
        self.floats.extend(values);
    }

    /// Closes the current row, checking that it has the same shape as the rows before it.
    pub fn end_row(&mut self, shape: Shape) -> Result<()> {
        let row = self.rows();
        match self.shape {
            None => self.shape = Some(shape),
            Some(existing) if existing != shape => {
                return Err(CollateError::MixedShape {
                    key: self.key.clone(),
                    row,
                });
            }
            Some(_) => {}
        }
        let end = if self.is_float() {
            self.floats.len()
        } else {
            self.ints.len()
        };
        self.offsets.push(end);
        Ok(())
    }

    /// Drops a row that failed halfway, so the column stays consistent.
    pub fn abandon_row(&mut self) {
        let start = *self.offsets.last().unwrap_or(&0);
        self.truncate_values(start);
    }

    /// How many values the column holds, the open row's included.
    pub fn values_len(&self) -> usize {
        if self.is_float() {
            self.floats.len()
        } else {
            self.ints.len()
        }
    }

    /// Keeps only the first `len` values (the kind stays as it is). For a reader that pushed a
    /// run of values and takes back its tail.
    pub fn truncate_values(&mut self, len: usize) {
        self.ints.truncate(len);
        self.floats.truncate(len);
        self.exact_ints.retain(|&(index, _)| index < len);
        self.unfit_ints.retain(|unfit| unfit.index < len);
    }

    /// The error of the first integer beyond int64, when the column holds one.
    fn unfit_error(&self) -> Result<()> {
        match self.unfit_ints.first() {
            None => Ok(()),
            Some(unfit) => Err(self.overflow_at(unfit.index)),
        }
    }

    /// The error of the first integer beyond uint64 too, when the column holds one: a float
    /// output whose dtype numpy infers cannot hold it (`np.asarray` makes an object array).
    pub fn beyond_u64_error(&self) -> Result<()> {
        match self.unfit_ints.iter().find(|unfit| !unfit.fits_u64) {
            None => Ok(()),
            Some(unfit) => Err(self.overflow_at(unfit.index)),
        }
    }

    fn overflow_at(&self, index: usize) -> CollateError {
        let row = self.row_of(index);
        let start = self.offsets.get(row).copied().unwrap_or(0);
        CollateError::Overflow {
            key: self.key.clone(),
            row,
            position: index.saturating_sub(start),
        }
    }

    /// An integer column's values as they are (no copy), or `Overflow` naming the first
    /// integer beyond int64. Only for a column that is not a float column.
    pub fn fitting_ints(&self) -> Result<&[i64]> {
        self.unfit_error()?;
        Ok(&self.ints)
    }

    /// The column's values as int64, as `torch.tensor(values, dtype=torch.int64)` makes them:
    /// floats truncate toward zero, integers are kept exact. NaN, infinities and floats outside
    /// int64 are an error naming the row (torch and numpy raise there too).
    pub fn to_ints(&self) -> Result<Vec<i64>> {
        self.unfit_error()?;
        if !self.is_float() {
            let mut out = self.output_vec(self.ints.len())?;
            out.extend_from_slice(&self.ints);
            return Ok(out);
        }
        let mut out = self.output_vec(self.floats.len())?;
        for (index, &value) in self.floats.iter().enumerate() {
            // -2**63 is exact in f64; 2**63 is not an int64.
            if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&value) {
                if self.exact_ints.iter().any(|&(i, _)| i == index) {
                    out.push(0);
                    continue;
                }
                return Err(CollateError::NotAnInteger {
                    key: self.key.clone(),
                    row: self.row_of(index),
                    value: value.to_string(),
                });
            }
            out.push(value as i64);
        }
        for &(index, value) in &self.exact_ints {
            if let Some(slot) = out.get_mut(index) {
                *slot = value;
            }
        }
        Ok(out)
    }

    /// The column's values as f64 (integers rounded once).
    pub fn to_floats(&self) -> Result<Vec<f64>> {
        let mut out = self.output_vec(self.floats.len().max(self.ints.len()))?;
        if self.is_float() {
            out.extend_from_slice(&self.floats);
        } else {
            out.extend(self.ints.iter().map(|&v| v as f64));
            for unfit in &self.unfit_ints {
                if let Some(slot) = out.get_mut(unfit.index) {
                    *slot = unfit.value;
                }
            }
        }
        Ok(out)
    }

    /// The column's values as f32, each rounded once from its exact value (an integer is not
    /// rounded to f64 first: that could round twice and differ from numpy and torch).
    pub fn to_f32s(&self) -> Result<Vec<f32>> {
        let mut out = self.output_vec(self.floats.len().max(self.ints.len()))?;
        if self.is_float() {
            out.extend(self.floats.iter().map(|&v| v as f32));
            for &(index, value) in &self.exact_ints {
                if let Some(slot) = out.get_mut(index) {
                    *slot = value as f32;
                }
            }
        } else {
            out.extend(self.ints.iter().map(|&v| v as f32));
        }
        // Beyond int64 only the f64 is known: rounded on from it, as torch and numpy round a
        // Python int through a double.
        for unfit in &self.unfit_ints {
            if let Some(slot) = out.get_mut(unfit.index) {
                *slot = unfit.value as f32;
            }
        }
        Ok(out)
    }

    /// The row that holds value `index`.
    pub fn row_of(&self, index: usize) -> usize {
        self.offsets
            .partition_point(|&offset| offset <= index)
            .saturating_sub(1)
    }

    /// An empty vector with room for `len` values, or OutOfMemory naming the key.
    fn output_vec<T>(&self, len: usize) -> Result<Vec<T>> {
        let mut out = Vec::new();
        out.try_reserve_exact(len)
            .map_err(|_| CollateError::OutOfMemory {
                key: self.key.clone(),
                bytes: len.saturating_mul(std::mem::size_of::<T>()),
            })?;
        Ok(out)
    }

    /// The kind the output gets; an all-empty column is an int column, as transformers makes it.
    pub fn output_kind(&self) -> Kind {
        self.kind.unwrap_or(Kind::Int)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotes_ints_to_floats_keeping_values() {
        let mut c = Column::new("x");
        c.extend_ints([1, 2]);
        c.end_row(Shape::Sequence).unwrap();
        c.push_float(0.5);
        c.end_row(Shape::Sequence).unwrap();
        assert_eq!(c.kind, Some(Kind::Float));
        assert_eq!(c.floats, vec![1.0, 2.0, 0.5]);
        assert_eq!(c.lengths(), vec![2, 1]);
    }

    #[test]
    fn bools_stay_bools_until_an_int_arrives() {
        let mut c = Column::new("m");
        c.extend_bools([true, false]);
        c.end_row(Shape::Sequence).unwrap();
        assert_eq!(c.kind, Some(Kind::Bool));
        c.push_int(7);
        c.end_row(Shape::Sequence).unwrap();
        assert_eq!(c.kind, Some(Kind::Int));
        assert_eq!(c.ints, vec![1, 0, 7]);
    }

    #[test]
    fn mixed_scalar_and_sequence_rows_are_rejected_with_the_row() {
        let mut c = Column::new("label");
        c.push_int(1);
        c.end_row(Shape::Scalar).unwrap();
        c.extend_ints([1, 2]);
        let err = c.end_row(Shape::Sequence).unwrap_err();
        assert_eq!(
            err,
            CollateError::MixedShape {
                key: "label".into(),
                row: 1
            }
        );
    }

    #[test]
    fn empty_arrays_do_not_promote() {
        let mut c = Column::new("x");
        c.extend_floats([]);
        c.end_row(Shape::Sequence).unwrap();
        c.extend_ints([1]);
        c.end_row(Shape::Sequence).unwrap();
        assert_eq!(c.kind, Some(Kind::Int));
    }

    const TWO_63: f64 = 9_223_372_036_854_775_808.0;

    fn overflow(row: usize, position: usize) -> CollateError {
        CollateError::Overflow {
            key: "label".into(),
            row,
            position,
        }
    }

    #[test]
    fn an_int_beyond_int64_before_a_float_becomes_its_float() {
        let mut c = Column::new("label");
        c.extend_ints([1, 2]);
        c.end_row(Shape::Sequence).unwrap();
        c.push_int(3);
        c.push_unfit_int(TWO_63, true);
        c.end_row(Shape::Sequence).unwrap();
        // Still integers: an integer output fails naming the first unfit int.
        assert_eq!(c.kind, Some(Kind::Int));
        assert_eq!(c.to_ints(), Err(overflow(1, 1)));
        assert_eq!(c.fitting_ints(), Err(overflow(1, 1)));
        // A float output takes its value even before a float arrives.
        assert_eq!(c.to_floats().unwrap(), vec![1.0, 2.0, 3.0, TWO_63]);
        assert_eq!(c.to_f32s().unwrap(), vec![1.0, 2.0, 3.0, TWO_63 as f32]);
        c.push_float(2.5);
        c.end_row(Shape::Sequence).unwrap();
        assert_eq!(c.kind, Some(Kind::Float));
        assert_eq!(c.floats, vec![1.0, 2.0, 3.0, TWO_63, 2.5]);
        assert_eq!(c.to_floats().unwrap(), c.floats);
        assert_eq!(c.to_f32s().unwrap()[3], TWO_63 as f32);
        assert_eq!(c.to_ints(), Err(overflow(1, 1)));
    }

    #[test]
    fn an_int_beyond_int64_after_a_float_is_pushed_as_a_float() {
        let mut c = Column::new("label");
        c.push_float(2.5);
        c.end_row(Shape::Scalar).unwrap();
        c.push_int(-4_611_686_018_427_387_903);
        c.end_row(Shape::Scalar).unwrap();
        c.push_unfit_int(-TWO_63 * 4.0, false);
        c.end_row(Shape::Scalar).unwrap();
        assert_eq!(
            c.to_floats().unwrap(),
            vec![2.5, -4_611_686_018_427_387_903_i64 as f64, -TWO_63 * 4.0]
        );
        assert_eq!(c.to_ints(), Err(overflow(2, 0)));
        // Past uint64: numpy's inferred dtype cannot hold it.
        assert_eq!(c.beyond_u64_error(), Err(overflow(2, 0)));
    }

    #[test]
    fn the_first_unfit_int_is_named_and_uint64_ones_pass_numpys_check() {
        let mut c = Column::new("label");
        c.push_int(1);
        c.end_row(Shape::Scalar).unwrap();
        c.push_unfit_int(TWO_63, true);
        c.end_row(Shape::Scalar).unwrap();
        c.push_unfit_int(TWO_63 * 2.0, false);
        c.end_row(Shape::Scalar).unwrap();
        assert_eq!(c.to_ints(), Err(overflow(1, 0)));
        assert_eq!(c.beyond_u64_error(), Err(overflow(2, 0)));
        let mut fits = Column::new("label");
        fits.push_unfit_int(TWO_63, true);
        fits.end_row(Shape::Scalar).unwrap();
        assert_eq!(fits.beyond_u64_error(), Ok(()));
    }

    #[test]
    fn an_abandoned_or_truncated_row_forgets_its_unfit_ints() {
        let mut c = Column::new("label");
        c.extend_ints([1]);
        c.end_row(Shape::Sequence).unwrap();
        c.push_unfit_int(TWO_63, true);
        c.abandon_row();
        assert!(c.unfit_ints.is_empty());
        assert_eq!(c.to_ints().unwrap(), vec![1]);
        c.extend_ints([5, 6, 7]);
        assert_eq!(c.values_len(), 4);
        c.truncate_values(2);
        c.push_unfit_int(TWO_63, true);
        c.truncate_values(2);
        c.end_row(Shape::Sequence).unwrap();
        assert_eq!(c.to_ints().unwrap(), vec![1, 5]);
        assert_eq!(c.lengths(), vec![1, 1]);
    }

    #[test]
    fn empty_column_is_int() {
        let mut c = Column::new("x");
        c.end_row(Shape::Sequence).unwrap();
        assert_eq!(c.output_kind(), Kind::Int);
        assert_eq!(c.lengths(), vec![0]);
    }
}
