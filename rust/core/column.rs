//! A column: the values of one key across the rows of a batch, stored flat with row offsets.
//!
//! The binding layer fills a column while it walks the Python rows; the padding functions read
//! it with the interpreter released. Values are kept as i64 until a float shows up (bools count
//! as integers but are remembered, so an all-bool column can come back as bool).

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
                    self.floats = self.ints.iter().map(|&v| v as f64).collect();
                    self.ints = Vec::new();
                }
                self.kind = Some(kind);
            }
            Some(_) => {}
        }
    }

    pub fn push_int(&mut self, value: i64) {
        self.promote(Kind::Int);
        if self.is_float() {
            self.floats.push(value as f64);
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

    /// Appends many integers at once (numpy / torch rows).
    pub fn extend_ints(&mut self, values: impl IntoIterator<Item = i64>) {
        self.promote(Kind::Int);
        if self.is_float() {
            self.floats.extend(values.into_iter().map(|v| v as f64));
        } else {
            self.ints.extend(values);
        }
    }

    pub fn extend_bools(&mut self, values: impl IntoIterator<Item = bool>) {
        self.promote(Kind::Bool);
        if self.is_float() {
            self.floats
                .extend(values.into_iter().map(|v| f64::from(u8::from(v))));
        } else {
            self.ints.extend(values.into_iter().map(i64::from));
        }
    }

    pub fn extend_floats(&mut self, values: impl IntoIterator<Item = f64>) {
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
    fn empty_column_is_int() {
        let mut c = Column::new("x");
        c.end_row(Shape::Sequence).unwrap();
        assert_eq!(c.output_kind(), Kind::Int);
        assert_eq!(c.lengths(), vec![0]);
    }
}
