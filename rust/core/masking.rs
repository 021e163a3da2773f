//! Masked-language-model masking over a padded batch, in place.
//!
//! Each maskable position (not a special token) is selected with probability `mlm_probability`
//! (in whole-word mode: each word, and then all of its tokens). A selected position's label is
//! its original id; every other label is -100. A selected token then becomes the mask token with
//! probability `mask_replace_prob`, a random id (uniform over the vocabulary) with probability
//! `random_replace_prob`, and stays as it is otherwise — the distributions transformers 5.x
//! draws from, with a generator of our own instead of torch's.
//!
//! The generator is xoshiro256++ (`core::rng`). A batch's stream is keyed by (seed, worker,
//! batch number), so seeded masks are a pure function of the three.

use crate::core::error::{CollateError, Result};
use crate::core::rng::{Rng, Xoshiro256PlusPlus};

/// `probability` as a threshold on `next_53`: a draw is below it with exactly that probability
/// (to 2^-53). 0 never passes, 1 always does.
fn threshold(probability: f64) -> u64 {
    const ONE: f64 = (1u64 << 53) as f64;
    (probability.clamp(0.0, 1.0) * ONE).ceil() as u64
}

/// What a batch is masked with. Probabilities must lie in [0, 1] (checked by `mask_tokens`).
#[derive(Debug, Clone, PartialEq)]
pub struct MaskOptions {
    pub mlm_probability: f64,
    pub mask_replace_prob: f64,
    pub random_replace_prob: f64,
    pub mask_token_id: i64,
    /// Random replacements are drawn uniformly from `0..vocab_size` (`len(tokenizer)`).
    pub vocab_size: u64,
}

/// Which positions can never be selected.
pub enum Special<'a> {
    /// Sorted token ids (the tokenizer's special tokens, padding among them).
    Ids(&'a [i64]),
    /// One flag per position, same layout as the ids (nonzero: special), e.g. the batch's
    /// padded `special_tokens_mask`.
    Flags(&'a [i64]),
}

impl Special<'_> {
    #[inline]
    fn at(&self, index: usize, id: i64) -> bool {
        match self {
            // A handful of ids in practice: a linear scan beats a binary search.
            Special::Ids(ids) if ids.len() <= 16 => ids.contains(&id),
            Special::Ids(ids) => ids.binary_search(&id).is_ok(),
            Special::Flags(flags) => flags[index] != 0,
        }
    }
}

fn check_probability(name: &str, value: f64) -> Result<()> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(CollateError::InvalidOption(format!(
            "{name} should be between 0 and 1, not {value}"
        )))
    }
}

fn check_options(options: &MaskOptions) -> Result<()> {
    check_probability("mlm_probability", options.mlm_probability)?;
    check_probability("mask_replace_prob", options.mask_replace_prob)?;
    check_probability("random_replace_prob", options.random_replace_prob)?;
    if options.mask_replace_prob + options.random_replace_prob > 1.0 {
        return Err(CollateError::InvalidOption(
            "The sum of mask_replace_prob and random_replace_prob should not exceed 1".into(),
        ));
    }
    let random_needed = options.random_replace_prob > 0.0 && options.mask_replace_prob < 1.0;
    if random_needed && (options.vocab_size == 0 || options.vocab_size > i64::MAX as u64) {
        return Err(CollateError::InvalidOption(format!(
            "random replacement draws ids from 0..len(tokenizer), which must be between 1 and \
             2^63 - 1, not {}",
            options.vocab_size
        )));
    }
    Ok(())
}

fn check_layout(key: &str, found: usize, expected: usize) -> Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(CollateError::InvalidOption(format!(
            "'{key}' holds {found} values where the padded 'input_ids' need {expected}; it must \
             have the batch's shape"
        )))
    }
}

/// What happens to a selected token, from one draw.
struct Replacement {
    to_mask: u64,
    to_random: u64,
    mask_token_id: i64,
    vocab_size: u64,
}

impl Replacement {
    fn new(options: &MaskOptions) -> Self {
        let to_mask = threshold(options.mask_replace_prob);
        // transformers draws no random replacement when either probability rules it out.
        let to_random = if options.mask_replace_prob >= 1.0 || options.random_replace_prob <= 0.0 {
            to_mask
        } else {
            threshold(options.mask_replace_prob + options.random_replace_prob).max(to_mask)
        };
        Self {
            to_mask,
            to_random,
            mask_token_id: options.mask_token_id,
            vocab_size: options.vocab_size,
        }
    }

    #[inline]
    fn apply(&self, rng: &mut Xoshiro256PlusPlus, id: &mut i64) {
        if self.to_mask == 0 && self.to_random == 0 {
            return;
        }
        let draw = rng.next_53();
        if draw < self.to_mask {
            *id = self.mask_token_id;
        } else if draw < self.to_random {
            // `check_options` bounds vocab_size by i64::MAX, so the id fits.
            *id = rng.below(self.vocab_size) as i64;
        }
    }
}

/// Masks `input_ids` (a `rows x columns` row-major batch) in place and returns the labels.
///
/// `offsets` (`rows x columns x 2`, start and end of each token in its text) turns on
/// whole-word masking: a word starts at a non-special token whose start differs from the end of
/// the token before it, or that follows a special token (the first token of a row always starts
/// one); it runs over the non-special tokens up to the next start. Words are selected with
/// `mlm_probability` and every token of a selected word is masked.
pub fn mask_tokens(
    input_ids: &mut [i64],
    columns: usize,
    special: &Special<'_>,
    offsets: Option<&[i64]>,
    options: &MaskOptions,
    rng: &mut Xoshiro256PlusPlus,
) -> Result<Vec<i64>> {
    check_options(options)?;
    let total = input_ids.len();
    if columns == 0 || total % columns != 0 {
        if total == 0 {
            return Ok(Vec::new());
        }
        return Err(CollateError::InvalidOption(format!(
            "'input_ids' holds {total} values, which is not a whole number of rows of {columns}"
        )));
    }
    match special {
        Special::Flags(flags) => check_layout("special_tokens_mask", flags.len(), total)?,
        Special::Ids(ids) if ids.windows(2).any(|pair| pair[0] >= pair[1]) => {
            return Err(CollateError::InvalidOption(
                "special token ids must be sorted and distinct".into(),
            ))
        }
        Special::Ids(_) => {}
    }
    if let Some(offsets) = offsets {
        let expected = total.checked_mul(2).ok_or_else(|| {
            CollateError::InvalidOption("'offset_mapping' is too large".to_string())
        })?;
        check_layout("offset_mapping", offsets.len(), expected)?;
    }
    let mut labels = Vec::new();
    labels.try_reserve_exact(total).map_err(|_| {
        CollateError::InvalidOption(format!(
            "out of memory allocating the labels of a batch of {total} tokens"
        ))
    })?;
    labels.resize(total, -100);

    let select = threshold(options.mlm_probability);
    let replacement = Replacement::new(options);
    match offsets {
        None => {
            for (index, (id, label)) in input_ids.iter_mut().zip(&mut labels).enumerate() {
                if !special.at(index, *id) && rng.next_53() < select {
                    *label = *id;
                    replacement.apply(rng, id);
                }
            }
        }
        Some(offsets) => {
            for row in 0..total / columns {
                let mut previous_end = -1;
                let mut previous_special = false;
                let mut word_selected = false;
                for index in row * columns..(row + 1) * columns {
                    let id = &mut input_ids[index];
                    let (start, end) = (offsets[2 * index], offsets[2 * index + 1]);
                    let is_special = special.at(index, *id);
                    if !is_special {
                        if start != previous_end || previous_special {
                            word_selected = rng.next_53() < select;
                        }
                        if word_selected {
                            labels[index] = *id;
                            replacement.apply(rng, id);
                        }
                    }
                    previous_end = end;
                    previous_special = is_special;
                }
            }
        }
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MASK: i64 = 103;
    const VOCAB: u64 = 1000;
    const SPECIAL: [i64; 4] = [0, 101, 102, 103];

    fn options(mlm: f64, mask: f64, random: f64) -> MaskOptions {
        MaskOptions {
            mlm_probability: mlm,
            mask_replace_prob: mask,
            random_replace_prob: random,
            mask_token_id: MASK,
            vocab_size: VOCAB,
        }
    }

    /// Rows of `[CLS] ids... [SEP] [PAD]...`, ids from 200 up (never special).
    fn batch(rows: usize, columns: usize) -> Vec<i64> {
        let mut ids = Vec::new();
        for row in 0..rows {
            let length = columns - row % 4;
            for column in 0..columns {
                ids.push(match column {
                    0 => 101,
                    c if c == length - 1 => 102,
                    c if c >= length => 0,
                    c => 200 + ((row * 7 + c * 13) % 700) as i64,
                });
            }
        }
        ids
    }

    /// |observed - expected| within 5 binomial standard errors.
    fn assert_rate(count: usize, trials: usize, p: f64) {
        let expected = trials as f64 * p;
        let sd = (trials as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (count as f64 - expected).abs() <= 5.0 * sd.max(1.0),
            "{count} of {trials}, expected {expected:.1} +- {sd:.1}"
        );
    }

    #[test]
    fn thresholds_are_exact_at_the_ends() {
        assert_eq!(threshold(0.0), 0);
        assert_eq!(threshold(1.0), 1 << 53);
        assert_eq!(threshold(0.5), 1 << 52);
    }

    #[test]
    fn selection_and_replacement_rates_match_the_probabilities() {
        for (mask, random) in [(0.8, 0.1), (0.5, 0.4), (0.0, 1.0), (1.0, 0.0), (0.5, 0.0)] {
            let (rows, columns) = (64, 128);
            let mut rng = Xoshiro256PlusPlus::for_batch(3, 0, 0);
            let (mut maskable, mut selected, mut masked, mut kept) = (0, 0, 0, 0);
            for _ in 0..20 {
                let original = batch(rows, columns);
                let mut ids = original.clone();
                let special = Special::Ids(&SPECIAL);
                let labels = mask_tokens(
                    &mut ids,
                    columns,
                    &special,
                    None,
                    &options(0.15, mask, random),
                    &mut rng,
                )
                .unwrap();
                for ((&before, &after), &label) in original.iter().zip(&ids).zip(&labels) {
                    if SPECIAL.contains(&before) {
                        assert_eq!(
                            (after, label),
                            (before, -100),
                            "special tokens are never selected"
                        );
                        continue;
                    }
                    maskable += 1;
                    if label == -100 {
                        assert_eq!(after, before);
                        continue;
                    }
                    assert_eq!(label, before);
                    selected += 1;
                    if after == MASK {
                        masked += 1;
                    } else if after == before {
                        kept += 1;
                    } else {
                        assert!((0..VOCAB as i64).contains(&after));
                    }
                }
            }
            assert_rate(selected, maskable, 0.15);
            // A random id can happen to be the mask id or the original (1 in VOCAB each).
            let random = if mask >= 1.0 || random <= 0.0 {
                0.0
            } else {
                random
            };
            let chance = random / VOCAB as f64;
            assert_rate(masked, selected, mask + chance);
            assert_rate(kept, selected, 1.0 - mask - random + chance);
        }
    }

    #[test]
    fn special_flags_decide_instead_of_ids() {
        let mut ids = vec![101, 5, 6, 102];
        let flags = [0, 1, 1, 1];
        let mut rng = Xoshiro256PlusPlus::from_seed(0);
        let labels = mask_tokens(
            &mut ids,
            4,
            &Special::Flags(&flags),
            None,
            &options(1.0, 1.0, 0.0),
            &mut rng,
        )
        .unwrap();
        assert_eq!(labels, [101, -100, -100, -100]);
        assert_eq!(ids, [MASK, 5, 6, 102]);
    }

    #[test]
    fn whole_words_are_selected_together() {
        // [CLS] un ##believ ##able story [SEP] [PAD]: words "unbelievable" and "story".
        let columns = 7;
        let offsets_row = [0, 0, 0, 2, 2, 8, 8, 12, 13, 18, 0, 0, 0, 0];
        let ids_row = [101, 300, 301, 302, 303, 102, 0];
        let rows = 4000;
        let mut ids: Vec<i64> = ids_row
            .iter()
            .copied()
            .cycle()
            .take(rows * columns)
            .collect();
        let offsets: Vec<i64> = offsets_row
            .iter()
            .copied()
            .cycle()
            .take(rows * columns * 2)
            .collect();
        let mut rng = Xoshiro256PlusPlus::for_batch(11, 0, 0);
        let labels = mask_tokens(
            &mut ids,
            columns,
            &Special::Ids(&SPECIAL),
            Some(&offsets),
            &options(0.3, 1.0, 0.0),
            &mut rng,
        )
        .unwrap();
        let (mut first_word, mut second_word) = (0, 0);
        for row in labels.chunks(columns) {
            let word: Vec<bool> = row.iter().map(|&l| l != -100).collect();
            assert!(!word[0] && !word[5] && !word[6]);
            assert!(
                word[1] == word[2] && word[2] == word[3],
                "a word is masked whole"
            );
            first_word += usize::from(word[1]);
            second_word += usize::from(word[4]);
        }
        assert_rate(first_word, rows, 0.3);
        assert_rate(second_word, rows, 0.3);
        for (row, labels) in ids.chunks(columns).zip(labels.chunks(columns)) {
            for (column, (&id, &label)) in row.iter().zip(labels).enumerate() {
                let expected = if label == -100 { ids_row[column] } else { MASK };
                assert_eq!(id, expected);
            }
        }
    }

    #[test]
    fn a_special_token_starts_a_new_word_after_it() {
        // Two tokens with touching offsets, split by a special token: two words, drawn apart.
        let offsets = [0, 3, 3, 3, 3, 6];
        let mut outcomes = [0usize; 4];
        for seed in 0..400 {
            let mut row = vec![300, 102, 301];
            let mut rng = Xoshiro256PlusPlus::from_seed(seed);
            let labels = mask_tokens(
                &mut row,
                3,
                &Special::Ids(&SPECIAL),
                Some(&offsets),
                &options(0.5, 1.0, 0.0),
                &mut rng,
            )
            .unwrap();
            assert_eq!(labels[1], -100);
            outcomes[usize::from(labels[0] != -100) * 2 + usize::from(labels[2] != -100)] += 1;
        }
        assert!(outcomes.iter().all(|&n| n > 50), "{outcomes:?}");
    }

    #[test]
    fn bad_shapes_and_options_are_errors() {
        let mut rng = Xoshiro256PlusPlus::from_seed(0);
        let special = Special::Ids(&SPECIAL);
        let good = options(0.15, 0.8, 0.1);
        let mut ids = vec![1, 2, 3, 4];
        assert!(mask_tokens(&mut ids, 3, &special, None, &good, &mut rng).is_err());
        let err =
            mask_tokens(&mut ids, 2, &Special::Flags(&[0, 0]), None, &good, &mut rng).unwrap_err();
        assert!(err.to_string().contains("'special_tokens_mask'"));
        let err = mask_tokens(&mut ids, 2, &special, Some(&[0; 4]), &good, &mut rng).unwrap_err();
        assert!(err.to_string().contains("'offset_mapping'"));
        let unsorted = Special::Ids(&[5, 3]);
        let err = mask_tokens(&mut ids, 2, &unsorted, None, &good, &mut rng).unwrap_err();
        assert!(err.to_string().contains("sorted"));
        let err = mask_tokens(&mut ids, 2, &special, Some(&[0; 4]), &good, &mut rng).unwrap_err();
        assert!(err.to_string().contains("'offset_mapping'"));
        for bad in [
            options(f64::NAN, 0.8, 0.1),
            options(1.5, 0.8, 0.1),
            options(0.15, 0.8, 0.3),
            MaskOptions {
                vocab_size: 0,
                ..good.clone()
            },
        ] {
            assert!(mask_tokens(&mut ids, 2, &special, None, &bad, &mut rng).is_err());
        }
        assert_eq!(ids, [1, 2, 3, 4], "nothing is written on error");
        assert!(mask_tokens(&mut [], 0, &special, None, &good, &mut rng)
            .unwrap()
            .is_empty());
    }
}
