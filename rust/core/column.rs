//! A column: the values of one key across the rows of a batch, stored flat with row offsets.
//!
//! The binding layer fills a column while it walks the Python rows; the padding functions read
//! it with the interpreter released. Values are kept as i64 until a float shows up (bools count
//! as integers but are remembered, so an all-bool column can come back as bool). Once floats
//! arrive, integers that f64 cannot hold exactly (beyond 2**53) are also kept aside, exact, so
//! an integer output still gets them unchanged and a float output rounds them once, from the
//! integer, as numpy and torch do.

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
            offsets,
        }
    }

    pub fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn len_of(&self, row: usize) -> usize {
        self.offsets[row + 1] - self.offsets[row]
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
        self.ints.truncate(start.min(self.ints.len()));
        self.floats.truncate(start.min(self.floats.len()));
        let floats = self.floats.len();
        self.exact_ints.retain(|&(index, _)| index < floats);
    }

    /// The column's values as int64, as `torch.tensor(values, dtype=torch.int64)` makes them:
    /// floats truncate toward zero, integers are kept exact. NaN, infinities and floats outside
    /// int64 are an error naming the row (torch and numpy raise there too).
    pub fn to_ints(&self) -> Result<Vec<i64>> {
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

    #[test]
    fn empty_column_is_int() {
        let mut c = Column::new("x");
        c.end_row(Shape::Sequence).unwrap();
        assert_eq!(c.output_kind(), Kind::Int);
        assert_eq!(c.lengths(), vec![0]);
    }
}
