//! Flattening a batch into one packed row (transformers' `DataCollatorWithFlattening`).
//!
//! Every sequence of the batch is laid end to end: `input_ids` and `labels` become one row of
//! `total_tokens` values, with the first label of each sequence replaced by a separator so no
//! loss is computed across a boundary. Position ids restart for every sequence; `seq_idx` and
//! the cumulative lengths tell attention kernels where each sequence starts.

use crate::core::column::{Column, Kind, Shape};
use crate::core::error::{CollateError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlattenOptions {
    /// Written over the first label of every sequence.
    pub separator_id: i64,
    /// The position id of the first token of every sequence.
    pub position_ids_start: i64,
    pub position_ids: bool,
    pub seq_idx: bool,
    /// `cu_seq_lens` and `max_length` (FlashAttention's varlen arguments).
    pub cu_seq_lens: bool,
    /// What a row with no tokens does.
    pub empty_rows: EmptyRows,
}

/// What a row whose `input_ids` are empty does to a flattened batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyRows {
    /// An error naming the row (a separator label past its end would leave labels one longer
    /// than input_ids: transformers before 5.24 built that mismatched batch).
    Reject,
    /// The row adds no sequence; its labels must be empty too (TRL's padding-free collator).
    Skip,
    /// The row is left out, labels and all (transformers 5.24's `DataCollatorWithFlattening`).
    Drop,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Flattened {
    pub input_ids: Vec<i64>,
    pub labels: Vec<i64>,
    pub position_ids: Option<Vec<i64>>,
    pub seq_idx: Option<Vec<i32>>,
    /// `rows + 1` offsets: 0, then the running total of sequence lengths.
    pub cu_seq_lens: Option<Vec<i32>>,
    pub max_length: usize,
}

/// A sequence column's values as int64, as `torch.tensor(values, dtype=torch.int64)` makes them
/// (floats truncate toward zero).
fn into_ints(column: Column) -> Result<(Vec<i64>, Vec<usize>)> {
    if column.shape == Some(Shape::Scalar) {
        return Err(CollateError::InvalidOption(format!(
            "'{}' in row 0 is a single number; flattening needs a sequence of token ids in \
             every row",
            column.key
        )));
    }
    let values = if column.kind == Some(Kind::Float) {
        column.to_ints()?
    } else {
        column.fitting_ints()?;
        column.ints
    };
    Ok((values, column.offsets))
}

fn too_many_tokens(what: &str, total: usize) -> CollateError {
    CollateError::InvalidOption(format!(
        "the batch holds {total} tokens, too many for the int32 {what}; use smaller batches"
    ))
}

/// Each row's sequence lengths (pre-packed rows: TRL's `seq_lengths`), end to end, after
/// checking that every length is at least 1 and that a row's add up to its number of tokens.
pub fn split_rows(column: Column, row_lengths: &[usize], ids_key: &str) -> Result<Vec<usize>> {
    let key = column.key.clone();
    let (values, offsets) = into_ints(column)?;
    if offsets.len() != row_lengths.len() + 1 {
        return Err(CollateError::InvalidOption(format!(
            "'{key}' has {} rows but '{ids_key}' has {}",
            offsets.len().saturating_sub(1),
            row_lengths.len()
        )));
    }
    let mut sequences = Vec::with_capacity(values.len());
    for (row, (w, &tokens)) in offsets.windows(2).zip(row_lengths).enumerate() {
        let lengths = &values[w[0]..w[1]];
        if lengths.iter().any(|&l| l < 1) {
            return Err(CollateError::InvalidOption(format!(
                "'{key}' in row {row} holds {lengths:?}: every sequence of a pre-packed row \
                 needs at least one token"
            )));
        }
        let sum: i128 = lengths.iter().map(|&l| i128::from(l)).sum();
        if sum != tokens as i128 {
            return Err(CollateError::InvalidOption(format!(
                "'{key}' in row {row} add up to {sum} but '{ids_key}' has {tokens} tokens; the \
                 lengths of a pre-packed row must cover the row"
            )));
        }
        // Each length is at least 1 and at most the row's token count, so it fits a usize.
        sequences.extend(lengths.iter().map(|&l| l as usize));
    }
    Ok(sequences)
}

/// Packs `input_ids` (and `labels`, when the rows have them) into one row. With
/// `sequence_lengths` (pre-packed rows), every row holds those sequences instead of one.
pub fn flatten(
    input_ids: Column,
    labels: Option<Column>,
    sequence_lengths: Option<Column>,
    options: &FlattenOptions,
) -> Result<Flattened> {
    let key = input_ids.key.clone();
    let (input_ids, offsets) = into_ints(input_ids)?;
    let rows = offsets.len() - 1;
    if rows == 0 {
        return Err(CollateError::EmptyBatch);
    }
    let lengths: Vec<usize> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
    // An empty sequence would still get a separator label, leaving labels one longer than
    // input_ids (transformers builds that mismatched batch; the model then fails far away).
    if let Some(row) = lengths.iter().position(|&l| l == 0) {
        if options.empty_rows == EmptyRows::Reject {
            return Err(CollateError::InvalidOption(format!(
                "'{key}' in row {row} is empty; every flattened sequence needs at least one token"
            )));
        }
    }
    let total = input_ids.len();
    if total == 0 {
        return Err(CollateError::InvalidOption(format!(
            "'{key}' holds no tokens in any row; a flattened batch needs one"
        )));
    }

    let mut labels = match labels {
        None => input_ids.clone(),
        Some(column) => {
            let label_key = column.key.clone();
            let (mut values, label_offsets) = into_ints(column)?;
            let dropped = |row: usize| options.empty_rows == EmptyRows::Drop && lengths[row] == 0;
            for (row, w) in label_offsets.windows(2).enumerate() {
                let length = w[1] - w[0];
                if length != lengths[row] && !dropped(row) {
                    return Err(CollateError::InvalidOption(format!(
                        "'{label_key}' in row {row} has length {length} but '{key}' has length \
                         {}; flattening needs one label per token",
                        lengths[row]
                    )));
                }
            }
            if values.len() != total {
                // Only dropped rows' labels can make up the difference: keep the others'.
                let mut kept = Vec::with_capacity(total);
                for (row, w) in label_offsets.windows(2).enumerate() {
                    if !dropped(row) {
                        kept.extend_from_slice(&values[w[0]..w[1]]);
                    }
                }
                values = kept;
            }
            values
        }
    };
    let lengths = match sequence_lengths {
        None => lengths,
        Some(column) => split_rows(column, &lengths, &key)?,
    };
    let mut start = 0;
    for &length in &lengths {
        if length > 0 {
            labels[start] = options.separator_id;
        }
        start += length;
    }

    let max_length = lengths.iter().copied().max().unwrap_or(0);
    let position_ids = if options.position_ids {
        let fits = i64::try_from(max_length)
            .ok()
            .and_then(|m| options.position_ids_start.checked_add(m))
            .is_some();
        if !fits {
            return Err(CollateError::InvalidOption(format!(
                "position_ids_start={} plus a sequence of {max_length} tokens overflows int64",
                options.position_ids_start
            )));
        }
        let mut positions = Vec::with_capacity(total);
        for &length in &lengths {
            positions.extend((0..length as i64).map(|i| options.position_ids_start + i));
        }
        Some(positions)
    } else {
        None
    };

    let seq_idx = if options.seq_idx {
        if i32::try_from(lengths.len()).is_err() {
            return Err(too_many_tokens("seq_idx", total));
        }
        // Numbered over the sequences, so an empty row (when skipped) takes no number.
        let mut seq_idx = Vec::with_capacity(total);
        for (sequence, &length) in lengths.iter().filter(|&&l| l > 0).enumerate() {
            seq_idx.extend(std::iter::repeat_n(sequence as i32, length));
        }
        Some(seq_idx)
    } else {
        None
    };

    let cu_seq_lens = if options.cu_seq_lens {
        if i32::try_from(total).is_err() {
            return Err(too_many_tokens("cu_seq_lens", total));
        }
        let mut boundaries = Vec::with_capacity(lengths.len() + 1);
        boundaries.push(0);
        let mut end = 0;
        for &length in &lengths {
            if length > 0 {
                end += length;
                boundaries.push(end as i32);
            }
        }
        Some(boundaries)
    } else {
        None
    };

    Ok(Flattened {
        input_ids,
        labels,
        position_ids,
        seq_idx,
        cu_seq_lens,
        max_length,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(key: &str, rows: &[&[i64]]) -> Column {
        let mut c = Column::new(key);
        for row in rows {
            c.extend_ints(row.iter().copied());
            c.end_row(Shape::Sequence).unwrap();
        }
        c
    }

    fn all_options() -> FlattenOptions {
        FlattenOptions {
            separator_id: -100,
            position_ids_start: 0,
            position_ids: true,
            seq_idx: true,
            cu_seq_lens: true,
            empty_rows: EmptyRows::Reject,
        }
    }

    #[test]
    fn packs_rows_with_separators_positions_and_offsets() {
        let ids = column("input_ids", &[&[5, 6, 7], &[8, 9]]);
        let out = flatten(ids, None, None, &all_options()).unwrap();
        assert_eq!(out.input_ids, vec![5, 6, 7, 8, 9]);
        assert_eq!(out.labels, vec![-100, 6, 7, -100, 9]);
        assert_eq!(out.position_ids, Some(vec![0, 1, 2, 0, 1]));
        assert_eq!(out.seq_idx, Some(vec![0, 0, 0, 1, 1]));
        assert_eq!(out.cu_seq_lens, Some(vec![0, 3, 5]));
        assert_eq!(out.max_length, 3);
    }

    #[test]
    fn uses_given_labels_and_position_start() {
        let ids = column("input_ids", &[&[5, 6], &[8]]);
        let labels = column("labels", &[&[1, 2], &[3]]);
        let options = FlattenOptions {
            separator_id: -1,
            position_ids_start: 2,
            position_ids: true,
            seq_idx: false,
            cu_seq_lens: false,
            empty_rows: EmptyRows::Reject,
        };
        let out = flatten(ids, Some(labels), None, &options).unwrap();
        assert_eq!(out.labels, vec![-1, 2, -1]);
        assert_eq!(out.position_ids, Some(vec![2, 3, 2]));
        assert_eq!(out.seq_idx, None);
        assert_eq!(out.cu_seq_lens, None);
    }

    #[test]
    fn label_length_mismatch_names_the_row() {
        let ids = column("input_ids", &[&[5, 6], &[8]]);
        let labels = column("labels", &[&[1, 2], &[3, 4]]);
        let err = flatten(ids, Some(labels), None, &all_options()).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("'labels' in row 1"), "{message}");
    }

    #[test]
    fn empty_sequence_and_scalar_rows_are_rejected() {
        let ids = column("input_ids", &[&[5], &[]]);
        let message = flatten(ids, None, None, &all_options())
            .unwrap_err()
            .to_string();
        assert!(message.contains("row 1 is empty"), "{message}");

        let mut scalars = Column::new("input_ids");
        scalars.push_int(3);
        scalars.end_row(Shape::Scalar).unwrap();
        assert!(flatten(scalars, None, None, &all_options()).is_err());
    }

    #[test]
    fn float_ids_truncate_and_empty_batch_fails() {
        let mut ids = Column::new("input_ids");
        ids.extend_floats([1.9, -2.5]);
        ids.end_row(Shape::Sequence).unwrap();
        let out = flatten(ids, None, None, &all_options()).unwrap();
        assert_eq!(out.input_ids, vec![1, -2]);
        assert_eq!(
            flatten(Column::new("input_ids"), None, None, &all_options()).unwrap_err(),
            CollateError::EmptyBatch
        );
    }

    #[test]
    fn skipped_empty_rows_add_no_sequence() {
        let ids = column("input_ids", &[&[], &[5, 6], &[], &[7]]);
        let mut options = all_options();
        options.empty_rows = EmptyRows::Skip;
        let out = flatten(ids, None, None, &options).unwrap();
        assert_eq!(out.input_ids, vec![5, 6, 7]);
        assert_eq!(out.labels, vec![-100, 6, -100]);
        assert_eq!(out.position_ids, Some(vec![0, 1, 0]));
        assert_eq!(out.seq_idx, Some(vec![0, 0, 1]));
        assert_eq!(out.cu_seq_lens, Some(vec![0, 2, 3]));
        assert_eq!(out.max_length, 2);

        let nothing = column("input_ids", &[&[], &[]]);
        let message = flatten(nothing, None, None, &options)
            .unwrap_err()
            .to_string();
        assert!(message.contains("no tokens in any row"), "{message}");
    }

    #[test]
    fn dropped_empty_rows_take_their_labels_with_them() {
        let ids = column("input_ids", &[&[], &[5, 6], &[], &[7]]);
        let labels = column("labels", &[&[1, 2, 3], &[8, 9], &[], &[4]]);
        let mut options = all_options();
        options.empty_rows = EmptyRows::Drop;
        let out = flatten(ids.clone(), Some(labels.clone()), None, &options).unwrap();
        assert_eq!(out.input_ids, vec![5, 6, 7]);
        assert_eq!(out.labels, vec![-100, 9, -100]);
        assert_eq!(out.seq_idx, Some(vec![0, 0, 1]));
        assert_eq!(out.cu_seq_lens, Some(vec![0, 2, 3]));

        // Skipping keeps the label check: the empty row 0 has three labels.
        options.empty_rows = EmptyRows::Skip;
        let message = flatten(ids, Some(labels), None, &options)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("'labels' in row 0 has length 3"),
            "{message}"
        );

        // A non-empty row's labels are still checked when empty rows are dropped.
        options.empty_rows = EmptyRows::Drop;
        let ids = column("input_ids", &[&[], &[5, 6]]);
        let labels = column("labels", &[&[], &[8]]);
        let message = flatten(ids, Some(labels), None, &options)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("'labels' in row 1 has length 1"),
            "{message}"
        );
    }

    #[test]
    fn pre_packed_rows_restart_at_every_sequence() {
        let ids = column("input_ids", &[&[1, 2, 3, 4, 5], &[], &[6, 7]]);
        let lengths = column("seq_lengths", &[&[2, 3], &[], &[2]]);
        let mut options = all_options();
        options.empty_rows = EmptyRows::Skip;
        let out = flatten(ids, None, Some(lengths), &options).unwrap();
        assert_eq!(out.input_ids, vec![1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(out.labels, vec![-100, 2, -100, 4, 5, -100, 7]);
        assert_eq!(out.position_ids, Some(vec![0, 1, 0, 1, 2, 0, 1]));
        assert_eq!(out.seq_idx, Some(vec![0, 0, 1, 1, 1, 2, 2]));
        assert_eq!(out.cu_seq_lens, Some(vec![0, 2, 5, 7]));
        assert_eq!(out.max_length, 3);
    }

    #[test]
    fn pre_packed_lengths_must_cover_the_row_and_be_positive() {
        let cases: [(&[&[i64]], &str); 3] = [
            (&[&[2, 2], &[1]], "'seq_lengths' in row 0 add up to 4"),
            (&[&[3], &[0, 1]], "'seq_lengths' in row 1 holds [0, 1]"),
            (&[&[3]], "'seq_lengths' has 1 rows"),
        ];
        for (lengths, expected) in cases {
            let ids = column("input_ids", &[&[1, 2, 3], &[4]]);
            let lengths = column("seq_lengths", lengths);
            let err = flatten(ids, None, Some(lengths), &all_options()).unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
        }
    }

    #[test]
    fn position_overflow_is_an_error() {
        let ids = column("input_ids", &[&[1, 2]]);
        let mut options = all_options();
        options.position_ids_start = i64::MAX;
        assert!(flatten(ids, None, None, &options).is_err());
    }
}
