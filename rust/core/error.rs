//! Errors of the collation core. Every variant names the key and the row it is about, so the
//! binding layer can turn it into a Python exception a user can act on.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum CollateError {
    /// The batch holds no rows.
    EmptyBatch,
    /// A row lacks a key that the first row has.
    MissingKey { key: String, row: usize },
    /// A row is not a mapping (dict, BatchEncoding, ...).
    NotAMapping { row: usize, type_name: String },
    /// A sequence holds something other than an integer, float or bool.
    NotANumber {
        key: String,
        row: usize,
        position: usize,
        type_name: String,
    },
    /// An integer does not fit in int64.
    Overflow {
        key: String,
        row: usize,
        position: usize,
    },
    /// A value nests deeper than a flat sequence where a flat sequence is needed.
    TooDeep { key: String, row: usize },
    /// Some rows hold a scalar and others a sequence under the same key.
    MixedShape { key: String, row: usize },
    /// A padded key whose length differs from the main input's in the same row.
    LengthMismatch {
        key: String,
        row: usize,
        length: usize,
        main_key: String,
        main_length: usize,
    },
    /// Sequences of different lengths under a key that is stacked without padding.
    Ragged {
        key: String,
        row: usize,
        length: usize,
        expected: usize,
    },
    /// A row longer than `max_length` under the "max_length" strategy.
    TooLong {
        key: String,
        row: usize,
        length: usize,
        max_length: usize,
    },
    /// A bad option (unknown padding strategy or side, zero multiple, ...).
    InvalidOption(String),
}

impl fmt::Display for CollateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use CollateError::*;
        match self {
            EmptyBatch => write!(f, "cannot collate an empty batch: no rows were given"),
            MissingKey { key, row } => write!(
                f,
                "row {row} has no key '{key}', which the first row has; every row of a batch \
                 needs the same keys"
            ),
            NotAMapping { row, type_name } => {
                write!(
                    f,
                    "row {row} is a {type_name}, not a mapping of feature names to values"
                )
            }
            NotANumber {
                key,
                row,
                position,
                type_name,
            } => write!(
                f,
                "'{key}' in row {row} holds a {type_name} at position {position}; \
                 expected integers, floats or bools"
            ),
            Overflow { key, row, position } => write!(
                f,
                "'{key}' in row {row} holds an integer at position {position} that does not fit \
                 in int64"
            ),
            TooDeep { key, row } => write!(
                f,
                "'{key}' in row {row} nests deeper than a flat sequence of numbers, which is the \
                 deepest that can be padded"
            ),
            MixedShape { key, row } => write!(
                f,
                "'{key}' in row {row} is a scalar where other rows hold a sequence (or the \
                 reverse)"
            ),
            LengthMismatch {
                key,
                row,
                length,
                main_key,
                main_length,
            } => write!(
                f,
                "'{key}' in row {row} has length {length} but '{main_key}' has length \
                 {main_length}; padded keys must match the main input row by row"
            ),
            Ragged {
                key,
                row,
                length,
                expected,
            } => write!(
                f,
                "'{key}' in row {row} has length {length} but row 0 has length {expected}; \
                 sequences that are not padded must all have the same length (pad this key or \
                 use a collator that pads it)"
            ),
            TooLong {
                key,
                row,
                length,
                max_length,
            } => write!(
                f,
                "'{key}' in row {row} has length {length}, longer than max_length={max_length}; \
                 padding never truncates: truncate when tokenizing (truncation=True, \
                 max_length={max_length}) or raise max_length"
            ),
            InvalidOption(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for CollateError {}

pub type Result<T> = std::result::Result<T, CollateError>;
