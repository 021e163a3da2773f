//! Preference batches (TRL's DPO and KTO collators): every row's prompt joined to its
//! completion, cut to a maximum length from the start or the end, and padded right into one
//! matrix, with the attention mask and the completion mask (1 on the completion's tokens)
//! written in the same pass. The joined lists are never built.

use std::mem::MaybeUninit;
use std::ops::Range;

use crate::core::error::{CollateError, Result};
use crate::core::sizes;

/// Sequences laid end to end: row `i` is `values[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, Copy)]
pub struct Sequences<'a> {
    pub key: &'a str,
    pub values: &'a [i64],
    pub offsets: &'a [usize],
}

impl<'a> Sequences<'a> {
    pub fn rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Row `row`'s values; None when the offsets do not fit the values.
    fn row(&self, row: usize) -> Option<&'a [i64]> {
        let start = *self.offsets.get(row)?;
        let end = *self.offsets.get(row + 1)?;
        self.values.get(start..end)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinOptions {
    pub pad_id: i64,
    /// The width is rounded up to a multiple of this (at least 1).
    pub multiple: Option<usize>,
    /// Each joined sequence keeps at most this many tokens (at least 1).
    pub max_length: Option<usize>,
    /// Keep the last `max_length` tokens instead of the first.
    pub keep_end: bool,
    /// Write the completion mask (else `JoinedBatch::completion_mask` is left empty).
    pub completion_mask: bool,
}

/// `rows` × `width` matrices, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinedBatch {
    pub rows: usize,
    pub width: usize,
    pub input_ids: Vec<i64>,
    pub attention_mask: Vec<i64>,
    /// Empty unless `JoinOptions::completion_mask`.
    pub completion_mask: Vec<i64>,
}

/// An empty vector with room for `cells` values, or an error naming the output.
fn reserved(cells: usize) -> Result<Vec<i64>> {
    let mut out = Vec::new();
    out.try_reserve_exact(cells)
        .map_err(|_| CollateError::OutOfMemory {
            key: "input_ids".to_string(),
            bytes: cells.saturating_mul(8),
        })?;
    Ok(out)
}

/// The ranges of the prompt and of the completion a joined sequence keeps (the prompt's are
/// the first tokens of its output row).
pub fn kept(
    prompt: usize,
    completion: usize,
    options: &JoinOptions,
) -> (Range<usize>, Range<usize>) {
    let limit = match options.max_length {
        Some(limit) if prompt + completion > limit => limit,
        _ => return (0..prompt, 0..completion),
    };
    if options.keep_end {
        let completion_start = completion.saturating_sub(limit);
        let room = limit - (completion - completion_start);
        (
            prompt.saturating_sub(room)..prompt,
            completion_start..completion,
        )
    } else {
        let prompt_end = prompt.min(limit);
        let room = limit - prompt_end;
        (0..prompt_end, 0..completion.min(room))
    }
}

/// One column's sequence lengths (row `i` is `lengths[i]` long), named for error messages.
#[derive(Debug, Clone, Copy)]
pub struct Lengths<'a> {
    pub key: &'a str,
    pub lengths: &'a [usize],
}

/// Which sequence of a row a joined row's tokens are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Prompt,
    /// The completion of the set at this index.
    Completion(usize),
}

/// Joins `prompts` row by row to each set of `completions` in turn (output row
/// `set * batch + row`), cuts and pads the joined sequences together.
pub fn pad_joined(
    prompts: Sequences<'_>,
    completions: &[Sequences<'_>],
    options: &JoinOptions,
) -> Result<JoinedBatch> {
    let lengths = |set: &Sequences<'_>| -> Vec<usize> {
        set.offsets
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .collect()
    };
    let prompt_lengths = lengths(&prompts);
    let completion_lengths: Vec<Vec<usize>> = completions.iter().map(lengths).collect();
    let completion_views: Vec<Lengths<'_>> = completions
        .iter()
        .zip(&completion_lengths)
        .map(|(set, lengths)| Lengths {
            key: set.key,
            lengths,
        })
        .collect();
    let read = |part: Part, row: usize, start: usize, place: &mut [MaybeUninit<i64>]| {
        let set = match part {
            Part::Prompt => Some(&prompts),
            Part::Completion(index) => completions.get(index),
        };
        let values = set
            .and_then(|set| set.row(row))
            .and_then(|values| values.get(start..start.saturating_add(place.len())));
        values.map(|values| write_copy(place, values)).is_some()
    };
    let prompt_view = Lengths {
        key: prompts.key,
        lengths: &prompt_lengths,
    };
    pad_joined_with(prompt_view, &completion_views, options, read)?.ok_or_else(|| {
        CollateError::InvalidOption("a sequence is shorter than its offsets say".to_string())
    })
}

/// Sets every slot of `place` to `values` (as long as it).
pub fn write_copy(place: &mut [MaybeUninit<i64>], values: &[i64]) {
    for (slot, &value) in place.iter_mut().zip(values) {
        slot.write(value);
    }
}

/// Sets every slot of `place` to `value`.
fn write_fill(place: &mut [MaybeUninit<i64>], value: i64) {
    for slot in place {
        slot.write(value);
    }
}

/// `pad_joined` from the sequences' lengths alone: `write(part, row, start, place)` sets
/// every slot of `place` to that row's prompt or completion values from `start` on, straight
/// from wherever they are held. It returns false to give up, and then the result is
/// `Ok(None)`.
pub fn pad_joined_with(
    prompts: Lengths<'_>,
    completions: &[Lengths<'_>],
    options: &JoinOptions,
    mut write: impl FnMut(Part, usize, usize, &mut [MaybeUninit<i64>]) -> bool,
) -> Result<Option<JoinedBatch>> {
    let batch = prompts.lengths.len();
    if batch == 0 {
        return Err(CollateError::EmptyBatch);
    }
    if options.multiple == Some(0) || options.max_length == Some(0) {
        return Err(CollateError::InvalidOption(
            "pad_to_multiple_of and max_length must be at least 1".to_string(),
        ));
    }
    if let Some(set) = completions.iter().find(|set| set.lengths.len() != batch) {
        return Err(CollateError::InvalidOption(format!(
            "'{}' has {} rows but '{}' has {batch}",
            set.key,
            set.lengths.len(),
            prompts.key
        )));
    }
    let mut longest = 0;
    for set in completions {
        for (&prompt, &completion) in prompts.lengths.iter().zip(set.lengths) {
            let (prompt, completion) = kept(prompt, completion, options);
            longest = longest.max(prompt.len() + completion.len());
        }
    }
    let too_large = || CollateError::OutputTooLarge {
        key: "input_ids".to_string(),
        shape: vec![batch.saturating_mul(completions.len()), longest],
    };
    let width = match options.multiple {
        Some(multiple) => longest
            .div_ceil(multiple)
            .checked_mul(multiple)
            .ok_or_else(too_large)?,
        None => longest,
    };
    let rows = batch.checked_mul(completions.len()).ok_or_else(too_large)?;
    // Each of the (two or three) matrices checked by the one sizing rule before any is reserved.
    let cells = sizes::output_elements::<i64>("input_ids", &[rows, width])?;
    let bytes = cells.saturating_mul(8);
    let mut matrices = vec![("input_ids", bytes), ("attention_mask", bytes)];
    if options.completion_mask {
        matrices.push(("completion_mask", bytes));
    }
    sizes::check_batch(&matrices)?;
    let mut input_ids = reserved(cells)?;
    let mut attention_mask = reserved(cells)?;
    let mut completion_mask = reserved(if options.completion_mask { cells } else { 0 })?;
    // Each cell is written once, straight into the reserved room: the tokens where they
    // go, the padding after them; nothing is filled beforehand.
    let ids = input_ids.spare_capacity_mut().get_mut(..cells);
    let mask = attention_mask.spare_capacity_mut().get_mut(..cells);
    let (Some(ids), Some(mask)) = (ids, mask) else {
        return Err(too_large());
    };
    let mut completion = match options.completion_mask {
        true => Some(
            completion_mask
                .spare_capacity_mut()
                .get_mut(..cells)
                .ok_or_else(too_large)?,
        ),
        false => None,
    };
    let mut output_row = 0;
    for (index, set) in completions.iter().enumerate() {
        for (row, (&prompt, &length)) in prompts.lengths.iter().zip(set.lengths).enumerate() {
            let (prompt, completion_range) = kept(prompt, length, options);
            let (held, end) = (prompt.len(), prompt.len() + completion_range.len());
            // `end <= longest <= width`, and `output_row < rows`: within the `cells` slots.
            let first = output_row * width;
            let Some(ids_row) = ids.get_mut(first..first + width) else {
                return Err(too_large());
            };
            let (tokens, padding) = ids_row.split_at_mut(end);
            let (prompt_slots, completion_slots) = tokens.split_at_mut(held);
            if !write(Part::Prompt, row, prompt.start, prompt_slots)
                || !write(
                    Part::Completion(index),
                    row,
                    completion_range.start,
                    completion_slots,
                )
            {
                return Ok(None);
            }
            write_fill(padding, options.pad_id);
            let Some(mask_row) = mask.get_mut(first..first + width) else {
                return Err(too_large());
            };
            let (ones, zeros) = mask_row.split_at_mut(end);
            write_fill(ones, 1);
            write_fill(zeros, 0);
            if let Some(slots) = completion.as_deref_mut() {
                let Some(row_slots) = slots.get_mut(first..first + width) else {
                    return Err(too_large());
                };
                let (before, rest) = row_slots.split_at_mut(held);
                let (ones, zeros) = rest.split_at_mut(end - held);
                write_fill(before, 0);
                write_fill(ones, 1);
                write_fill(zeros, 0);
            }
            output_row += 1;
        }
    }
    // SAFETY: every one of the `cells` reserved slots of each written matrix was set above:
    // `rows` rows (`output_row` counted each), each row's `width` slots split into the token,
    // padding and mask ranges that were all written.
    unsafe {
        input_ids.set_len(cells);
        attention_mask.set_len(cells);
        if options.completion_mask {
            completion_mask.set_len(cells);
        }
    }
    Ok(Some(JoinedBatch {
        rows,
        width,
        input_ids,
        attention_mask,
        completion_mask,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Owned {
        values: Vec<i64>,
        offsets: Vec<usize>,
    }

    fn owned(rows: &[&[i64]]) -> Owned {
        let mut offsets = vec![0];
        let mut values = Vec::new();
        for row in rows {
            values.extend_from_slice(row);
            offsets.push(values.len());
        }
        Owned { values, offsets }
    }

    fn view<'a>(key: &'a str, owned: &'a Owned) -> Sequences<'a> {
        Sequences {
            key,
            values: &owned.values,
            offsets: &owned.offsets,
        }
    }

    fn options(max_length: Option<usize>, keep_end: bool, multiple: Option<usize>) -> JoinOptions {
        JoinOptions {
            pad_id: 9,
            multiple,
            max_length,
            keep_end,
            completion_mask: true,
        }
    }

    #[test]
    fn joins_pads_and_masks_every_set_in_turn() {
        let prompts = owned(&[&[1, 2], &[3]]);
        let chosen = owned(&[&[4], &[5, 6, 7]]);
        let rejected = owned(&[&[], &[8]]);
        let out = pad_joined(
            view("prompt_ids", &prompts),
            &[view("chosen_ids", &chosen), view("rejected_ids", &rejected)],
            &options(None, false, None),
        )
        .unwrap();
        assert_eq!((out.rows, out.width), (4, 4));
        assert_eq!(
            out.input_ids,
            vec![1, 2, 4, 9, 3, 5, 6, 7, 1, 2, 9, 9, 3, 8, 9, 9]
        );
        assert_eq!(
            out.attention_mask,
            vec![1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0]
        );
        assert_eq!(
            out.completion_mask,
            vec![0, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0]
        );
        let without = pad_joined(
            view("prompt_ids", &prompts),
            &[view("chosen_ids", &chosen), view("rejected_ids", &rejected)],
            &JoinOptions {
                completion_mask: false,
                ..options(None, false, None)
            },
        )
        .unwrap();
        assert_eq!(without.input_ids, out.input_ids);
        assert_eq!(without.attention_mask, out.attention_mask);
        assert!(without.completion_mask.is_empty());
    }

    #[test]
    fn cuts_from_the_start_or_the_end_and_rounds_the_width() {
        let prompts = owned(&[&[1, 2, 3], &[4]]);
        let completions = owned(&[&[5, 6], &[7]]);
        let start = pad_joined(
            view("p", &prompts),
            &[view("c", &completions)],
            &options(Some(4), false, Some(3)),
        )
        .unwrap();
        assert_eq!(start.width, 6);
        assert_eq!(start.input_ids, vec![1, 2, 3, 5, 9, 9, 4, 7, 9, 9, 9, 9]);
        assert_eq!(
            start.completion_mask,
            vec![0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0]
        );
        let end = pad_joined(
            view("p", &prompts),
            &[view("c", &completions)],
            &options(Some(2), true, None),
        )
        .unwrap();
        assert_eq!(end.input_ids, vec![5, 6, 4, 7]);
        assert_eq!(end.completion_mask, vec![1, 1, 0, 1]);
        assert_eq!(end.attention_mask, vec![1, 1, 1, 1]);
        let prompt_only = pad_joined(
            view("p", &prompts),
            &[view("c", &completions)],
            &options(Some(2), false, None),
        )
        .unwrap();
        assert_eq!(prompt_only.input_ids, vec![1, 2, 4, 7]);
        assert_eq!(prompt_only.completion_mask, vec![0, 0, 0, 1]);
    }

    #[test]
    fn empty_batch_bad_options_and_mismatched_sets_are_errors() {
        let none = owned(&[]);
        assert_eq!(
            pad_joined(view("p", &none), &[], &options(None, false, None)).unwrap_err(),
            CollateError::EmptyBatch
        );
        let one = owned(&[&[1]]);
        let two = owned(&[&[1], &[2]]);
        assert!(pad_joined(
            view("p", &one),
            &[view("c", &two)],
            &options(None, false, None)
        )
        .unwrap_err()
        .to_string()
        .contains("'c' has 2 rows"));
        for bad in [options(Some(0), false, None), options(None, false, Some(0))] {
            assert!(pad_joined(view("p", &one), &[view("c", &one)], &bad).is_err());
        }
        let empty = owned(&[&[]]);
        let out = pad_joined(
            view("p", &empty),
            &[view("c", &empty)],
            &options(None, false, None),
        )
        .unwrap();
        assert_eq!((out.rows, out.width), (1, 0));
    }

    #[test]
    fn a_width_past_the_address_space_is_an_error() {
        let one = owned(&[&[1]]);
        let huge = options(None, false, Some(usize::MAX));
        assert!(matches!(
            pad_joined(view("p", &one), &[view("c", &one)], &huge),
            Err(CollateError::OutputTooLarge { .. })
        ));
    }

    #[test]
    fn writes_each_kept_range_from_its_start_and_gives_up_when_told() {
        let prompts = [3, 1];
        let completions = [2, 4];
        let prompt_view = Lengths {
            key: "p",
            lengths: &prompts,
        };
        let sets = [Lengths {
            key: "c",
            lengths: &completions,
        }];
        let mut calls = Vec::new();
        let out = pad_joined_with(
            prompt_view,
            &sets,
            &options(Some(3), true, None),
            |part, row, start, place| {
                calls.push((part, row, start, place.len()));
                let base = if part == Part::Prompt { 10 } else { 20 } + 100 * row as i64;
                for (offset, slot) in place.iter_mut().enumerate() {
                    slot.write(base + (start + offset) as i64);
                }
                true
            },
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            calls,
            vec![
                (Part::Prompt, 0, 2, 1),
                (Part::Completion(0), 0, 0, 2),
                (Part::Prompt, 1, 1, 0),
                (Part::Completion(0), 1, 1, 3),
            ]
        );
        assert_eq!(out.input_ids, vec![12, 20, 21, 121, 122, 123]);
        assert_eq!(out.completion_mask, vec![0, 1, 1, 1, 1, 1]);
        let gave_up = pad_joined_with(
            prompt_view,
            &sets,
            &options(None, false, None),
            |part, _, _, _| part == Part::Prompt,
        )
        .unwrap();
        assert_eq!(gave_up, None);
    }
}
