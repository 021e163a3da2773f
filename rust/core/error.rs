//! Errors of the collation core. Every variant names the key and the row it is about, so the
//! binding layer can turn it into a Python exception a user can act on.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum CollateError {
    /// The batch holds no rows.
    EmptyBatch,
    /// A row lacks a key that the first row has.
    MissingKey { key: String, row: usize },
    /// A later row holds a key the first row lacks (the batch's keys are the first row's).
    ExtraKey { key: String, row: usize },
    /// Token ids (a pad group's lead, where it must hold integers) holding floats.
    FloatTokenIds { key: String, row: usize },
    /// A row is not a mapping (dict, BatchEncoding, ...).
    NotAMapping { row: usize, type_name: String },
    /// A sequence holds something other than an integer, float or bool.
    NotANumber {
        key: String,
        row: usize,
        position: usize,
        type_name: String,
    },
    /// A float or bool where only integers are taken (TRL's padding-free collator).
    NotIntegers { key: String, row: usize },
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
    /// A float (NaN, an infinity, or beyond int64) where an integer output needs an integer.
    NotAnInteger {
        key: String,
        row: usize,
        value: String,
    },
    /// An output whose size cannot exist: its bytes overflow the address space.
    OutputTooLarge { key: String, shape: Vec<usize> },
    /// An output of more bytes than this machine can allocate (`core::sizes`), refused before
    /// anything is reserved (raised as MemoryError, as numpy does).
    NotEnoughMemory {
        key: String,
        shape: Vec<usize>,
        dtype: String,
        bytes: usize,
        limit: usize,
    },
    /// A call's outputs (`keys`), each within the machine's memory alone, that do not fit
    /// together (`core::sizes::check_batch`; raised as MemoryError).
    BatchTooLarge {
        keys: Vec<String>,
        bytes: usize,
        limit: usize,
    },
    /// An allocation of `bytes` for `key` failed (raised as MemoryError, as Python does).
    OutOfMemory { key: String, bytes: usize },
    /// A bad option (unknown padding strategy or side, zero multiple, ...).
    InvalidOption(String),
}

/// The Python exception class a [`CollateError`] becomes; the binding layer maps each to the
/// built-in of that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    Type,
    Value,
    Memory,
}

impl CollateError {
    /// The key and the row the error is about, where it names them: the binding layer hands
    /// them to Python as data (no caller parses the message).
    pub fn site(&self) -> (Option<&str>, Option<usize>) {
        use CollateError::*;
        match self {
            MissingKey { key, row }
            | ExtraKey { key, row }
            | FloatTokenIds { key, row }
            | NotANumber { key, row, .. }
            | NotIntegers { key, row }
            | Overflow { key, row, .. }
            | TooDeep { key, row }
            | MixedShape { key, row }
            | LengthMismatch { key, row, .. }
            | Ragged { key, row, .. }
            | TooLong { key, row, .. }
            | NotAnInteger { key, row, .. } => (Some(key), Some(*row)),
            NotAMapping { row, .. } => (None, Some(*row)),
            OutputTooLarge { key, .. } | NotEnoughMemory { key, .. } | OutOfMemory { key, .. } => {
                (Some(key), None)
            }
            EmptyBatch | BatchTooLarge { .. } | InvalidOption(_) => (None, None),
        }
    }

    /// What went wrong, as a short name that stays when the message is reworded.
    pub fn reason(&self) -> &'static str {
        use CollateError::*;
        match self {
            EmptyBatch => "empty_batch",
            MissingKey { .. } => "missing_key",
            ExtraKey { .. } => "extra_key",
            FloatTokenIds { .. } => "float_token_ids",
            NotAMapping { .. } => "not_a_mapping",
            NotANumber { .. } => "not_a_number",
            NotIntegers { .. } => "not_integers",
            Overflow { .. } => "overflow",
            TooDeep { .. } => "too_deep",
            MixedShape { .. } => "mixed_shape",
            LengthMismatch { .. } => "length_mismatch",
            Ragged { .. } => "ragged",
            TooLong { .. } => "too_long",
            NotAnInteger { .. } => "not_an_integer",
            OutputTooLarge { .. } => "output_too_large",
            NotEnoughMemory { .. } => "not_enough_memory",
            BatchTooLarge { .. } => "batch_too_large",
            OutOfMemory { .. } => "out_of_memory",
            InvalidOption(_) => "invalid_option",
        }
    }

    pub fn class(&self) -> ErrorClass {
        use CollateError::*;
        match self {
            NotANumber { .. } | NotAMapping { .. } | NotIntegers { .. } => ErrorClass::Type,
            OutOfMemory { .. } | NotEnoughMemory { .. } | BatchTooLarge { .. } => {
                ErrorClass::Memory
            }
            _ => ErrorClass::Value,
        }
    }
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
            ExtraKey { key, row } => write!(
                f,
                "row {row} has a key '{key}' that the first row lacks; a batch's keys are its \
                 first row's, so '{key}' would be left out: give every row of a batch the same \
                 keys"
            ),
            FloatTokenIds { key, row } => write!(
                f,
                "'{key}' in row {row} holds floats, not token ids; token ids must be integers: \
                 tokenize first, or give a list of ints or an integer numpy array or torch tensor"
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
            } if is_text(type_name) => {
                let fix = if holds_token_ids(key) {
                    "not token ids; tokenize first (the tokenizer's output holds the ids)"
                } else {
                    "not numbers; tokenize first, or map class names to integer ids"
                };
                write!(
                    f,
                    "'{key}' in row {row} holds text (a {type_name} at position {position}), \
                     {fix}"
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
            NotIntegers { key, row } => write!(
                f,
                "'{key}' in row {row} holds floats or bools, not token ids; it must hold \
                 integers: tokenize first, or convert the values to integers"
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
            NotAnInteger { key, row, value } => write!(
                f,
                "'{key}' in row {row} holds {value}, which cannot become an integer; the output \
                 of '{key}' is int64"
            ),
            OutputTooLarge { key, shape } => write!(
                f,
                "'{key}' would be an array of shape {}, more than memory can address; check \
                 max_length and pad_to_multiple_of",
                shape_text(shape)
            ),
            NotEnoughMemory {
                key,
                shape,
                dtype,
                bytes,
                limit,
            } => write!(
                f,
                "not enough memory for '{key}': unable to allocate {} for an array with shape \
                 {} and data type {dtype}, more than the {} this machine has; check max_length \
                 and pad_to_multiple_of",
                human_bytes(*bytes),
                shape_text(shape),
                human_bytes(*limit)
            ),
            BatchTooLarge { keys, bytes, limit } => {
                let keys: Vec<String> = keys.iter().map(|key| format!("'{key}'")).collect();
                write!(
                    f,
                    "not enough memory for {} together: unable to allocate {}, more than the {} \
                     this machine has; check max_length and pad_to_multiple_of",
                    keys.join(", "),
                    human_bytes(*bytes),
                    human_bytes(*limit)
                )
            }
            OutOfMemory { key, bytes } => write!(
                f,
                "not enough memory for '{key}': {bytes} bytes were needed; check max_length \
                 and pad_to_multiple_of"
            ),
            InvalidOption(message) => write!(f, "{message}"),
        }
    }
}

/// Whether a Python type name is text (str, bytes), which is what a token key holds before
/// tokenizing.
fn is_text(type_name: &str) -> bool {
    matches!(type_name, "str" | "bytes" | "str_" | "bytes_")
}

/// Whether `key` names token ids (`input_ids`, `decoder_input_ids`, `chosen_input_ids`, ...),
/// where text means the rows were not tokenized.
fn holds_token_ids(key: &str) -> bool {
    key.ends_with("input_ids")
}

/// A shape as numpy prints one: `(3, 128)`, `(4,)`.
fn shape_text(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(usize::to_string).collect();
    match parts.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", parts.join(", ")),
    }
}

impl std::error::Error for CollateError {}

pub type Result<T> = std::result::Result<T, CollateError>;

/// `bytes` as numpy writes a size in its MemoryError: a number of KiB, MiB, ... with two
/// decimals.
fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut unit = 0;
    let mut value = bytes as f64;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::human_bytes;
    use super::CollateError::*;

    fn text_in(key: &str, type_name: &str) -> String {
        NotANumber {
            key: key.into(),
            row: 2,
            position: 0,
            type_name: type_name.into(),
        }
        .to_string()
    }

    #[test]
    fn text_in_a_token_key_says_tokenize_first() {
        let message = text_in("decoder_input_ids", "str");
        assert!(message.starts_with("'decoder_input_ids' in row 2 holds text (a str"));
        assert!(message.contains("not token ids; tokenize first"));
        assert!(text_in("label", "str").contains("not numbers; tokenize first"));
        assert!(text_in("input_ids", "NoneType").ends_with("expected integers, floats or bools"));
    }

    #[test]
    fn floats_and_non_integers_are_in_the_same_family() {
        let floats = FloatTokenIds {
            key: "input_ids".into(),
            row: 1,
        }
        .to_string();
        assert!(floats.starts_with("'input_ids' in row 1 holds floats, not token ids;"));
        assert!(floats.contains("tokenize first"));
        let trl = NotIntegers {
            key: "input_ids".into(),
            row: 0,
        }
        .to_string();
        assert!(trl.starts_with("'input_ids' in row 0 holds floats or bools, not token ids;"));
        assert!(trl.contains("tokenize first"));
    }

    #[test]
    fn writes_sizes_as_numpy_does() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(1 << 44), "16.00 TiB");
        assert_eq!(human_bytes(3 << 29), "1.50 GiB");
    }
}
