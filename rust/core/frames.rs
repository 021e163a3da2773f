//! Padding rows of float frames as a sequence feature extractor pads them: raw audio (one value
//! a frame) or feature matrices (`width` values a frame, frames along the first axis), each row
//! optionally truncated to its first frames, then padded on one side to a common number of
//! frames, into one preallocated `rows × frames × width` buffer.
//!
//! The rules are those of transformers' `SequenceFeatureExtractor.pad`: truncation keeps a
//! row's first `max_length` frames (rounded up to `pad_to_multiple_of`); "longest" pads to the
//! longest row left after truncation, rounded up; "max_length" pads to `max_length`, rounded up;
//! "do_not_pad" stacks rows that must then be of one length.

use crate::core::error::{CollateError, Result};
use crate::core::fresh_pages::prefer_small_pages;
use crate::core::pad::{round_up, Strategy};
use crate::core::sizes;

/// One row's values, borrowed from its buffer: `frames × width` of them, frame after frame.
#[derive(Debug, Clone, Copy)]
pub enum FloatRow<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl FloatRow<'_> {
    fn len(&self) -> usize {
        match self {
            FloatRow::F32(values) => values.len(),
            FloatRow::F64(values) => values.len(),
        }
    }
}

/// Something whose first values can be written into a slice of `T`.
pub trait RowSource<T> {
    /// The number of values it holds.
    fn value_count(&self) -> usize;
    /// Writes its first `out.len()` values into `out` (the caller keeps `out.len()` within
    /// `value_count()`).
    fn write_first(&self, out: &mut [T]);
}

impl RowSource<f32> for FloatRow<'_> {
    fn value_count(&self) -> usize {
        self.len()
    }

    fn write_first(&self, out: &mut [f32]) {
        match self {
            FloatRow::F32(values) => out.copy_from_slice(&values[..out.len()]),
            // Rounded to the nearest float32, as numpy's astype(float32) rounds.
            FloatRow::F64(values) => {
                for (slot, &value) in out.iter_mut().zip(values.iter()) {
                    *slot = value as f32;
                }
            }
        }
    }
}

impl<T: Copy> RowSource<T> for &[T] {
    fn value_count(&self) -> usize {
        self.len()
    }

    fn write_first(&self, out: &mut [T]) {
        out.copy_from_slice(&self[..out.len()]);
    }
}

/// How rows of frames are padded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameOptions {
    pub strategy: Strategy,
    pub pad_to_multiple_of: Option<usize>,
    /// Keep at most `max_length` frames (rounded up to `pad_to_multiple_of`) of each row.
    pub truncate_to: Option<usize>,
    pub left: bool,
}

/// Where each row goes: `frames` frames per padded row, and how many of each row's frames are
/// kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameLayout {
    pub frames: usize,
    pub kept: Vec<usize>,
    pub left: bool,
}

/// The padded layout of rows holding `row_frames` frames each, or an error naming `key` and
/// the row: a row longer than the "max_length" target (without truncation), rows of different
/// lengths under "do_not_pad", or an output too large to exist.
pub fn frame_layout(
    key: &str,
    row_frames: &[usize],
    width: usize,
    options: &FrameOptions,
) -> Result<FrameLayout> {
    let multiple = options.pad_to_multiple_of;
    round_up(0, multiple)?;
    let kept: Vec<usize> = match options.truncate_to {
        None => row_frames.to_vec(),
        Some(max_length) => {
            let limit = round_up(max_length, multiple)?;
            row_frames.iter().map(|&n| n.min(limit)).collect()
        }
    };
    let frames = match options.strategy {
        Strategy::Longest => round_up(kept.iter().copied().max().unwrap_or(0), multiple)?,
        Strategy::MaxLength(max_length) => round_up(max_length, multiple)?,
        Strategy::DoNotPad => {
            let first = kept.first().copied().unwrap_or(0);
            if let Some((row, &length)) = kept.iter().enumerate().find(|(_, &n)| n != first) {
                return Err(CollateError::Ragged {
                    key: key.into(),
                    row,
                    length,
                    expected: first,
                });
            }
            first
        }
    };
    if let Some((row, &length)) = kept.iter().enumerate().find(|(_, &n)| n > frames) {
        return Err(CollateError::TooLong {
            key: key.into(),
            row,
            length,
            max_length: frames,
        });
    }
    // The values' buffer (float32, `rows × frames × width`; raw audio has no feature axis)
    // checked before anything is reserved; the mask beside it is checked where it is made.
    match width {
        1 => sizes::output_elements::<f32>(key, &[kept.len(), frames])?,
        _ => sizes::output_elements::<f32>(key, &[kept.len(), frames, width])?,
    };
    Ok(FrameLayout {
        frames,
        kept,
        left: options.left,
    })
}

/// The outputs of one padding call checked together before the first is reserved: the values'
/// float32 buffer (`rows × frames × width`) and, when `mask` names its key and element size,
/// the `rows × frames` attention mask beside it. Each passes the sizing rule alone, then both
/// together: a batch whose buffers fit one by one but not together is refused (MemoryError)
/// before anything is filled, as the token path refuses it.
pub fn check_outputs(
    key: &str,
    layout: &FrameLayout,
    width: usize,
    mask: Option<(&str, usize, &str)>,
) -> Result<()> {
    let rows = layout.kept.len();
    let values = match width {
        1 => sizes::output_elements::<f32>(key, &[rows, layout.frames])?,
        _ => sizes::output_elements::<f32>(key, &[rows, layout.frames, width])?,
    };
    let Some((mask_key, item, dtype)) = mask else {
        return Ok(());
    };
    let masks = sizes::checked_output(mask_key, &[rows, layout.frames], item, dtype)?;
    // Both products are within `isize::MAX` bytes (checked above): no overflow.
    sizes::check_batch(&[
        (key, values * std::mem::size_of::<f32>()),
        (mask_key, masks * item),
    ])
}

/// The `rows × frames × width` buffer of `rows` laid out by `layout`: each row's kept values,
/// `pad` in its other slots (before the values when `layout.left`). Every slot is written once.
/// A row whose values are fewer than its kept frames need is an error naming `key` and the row.
pub fn pad_frames<T: Copy, R: RowSource<T>>(
    key: &str,
    rows: &[R],
    width: usize,
    layout: &FrameLayout,
    pad: T,
) -> Result<Vec<T>> {
    if rows.len() != layout.kept.len() {
        return Err(CollateError::InvalidOption(format!(
            "'{key}': {} rows for a layout of {}",
            rows.len(),
            layout.kept.len()
        )));
    }
    let total = sizes::output_elements::<T>(key, &[rows.len(), layout.frames, width])?;
    let row_values = layout.frames.saturating_mul(width);
    for (row, (source, &kept)) in rows.iter().zip(&layout.kept).enumerate() {
        let needed = kept.saturating_mul(width);
        if needed > source.value_count() {
            return Err(CollateError::Ragged {
                key: key.into(),
                row,
                length: source.value_count(),
                expected: needed,
            });
        }
    }
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(total)
        .map_err(|_| CollateError::OutOfMemory {
            key: key.into(),
            bytes: total.saturating_mul(std::mem::size_of::<T>()),
        })?;
    // Written through the spare capacity, once per slot; the length is set when it is all
    // written.
    let spare = &mut out.spare_capacity_mut()[..total];
    for (slots, (source, &kept)) in spare
        .chunks_exact_mut(row_values.max(1))
        .zip(rows.iter().zip(&layout.kept))
    {
        let values = kept * width;
        let (pad_range, value_range) = if layout.left {
            (0..row_values - values, row_values - values..row_values)
        } else {
            (values..row_values, 0..values)
        };
        for slot in &mut slots[pad_range] {
            slot.write(pad);
        }
        let value_slots = &mut slots[value_range];
        // SAFETY: MaybeUninit<T> has T's layout; `write_first` only writes these slots, and
        // T is Copy (no destructor runs on the uninitialised values it overwrites).
        let value_slots: &mut [T] = unsafe {
            std::slice::from_raw_parts_mut(value_slots.as_mut_ptr().cast::<T>(), value_slots.len())
        };
        source.write_first(value_slots);
    }
    // SAFETY: every one of the `total` slots was written above (each row's pad and value
    // ranges cover its `row_values` slots, and the rows cover `total`).
    unsafe { out.set_len(total) };
    prefer_small_pages(&mut out);
    Ok(out)
}

/// The `rows × frames` attention mask of `layout`: 1 on each row's kept frames, 0 on its
/// padding.
pub fn frame_mask(key: &str, layout: &FrameLayout) -> Result<Vec<i32>> {
    let ones: Vec<i32> = vec![1; layout.kept.iter().copied().max().unwrap_or(0)];
    let rows: Vec<&[i32]> = layout.kept.iter().map(|&n| &ones[..n]).collect();
    pad_frames(key, &rows, 1, layout, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(strategy: Strategy) -> FrameOptions {
        FrameOptions {
            strategy,
            pad_to_multiple_of: None,
            truncate_to: None,
            left: false,
        }
    }

    #[test]
    fn values_and_mask_are_checked_together() {
        let layout = FrameLayout {
            frames: 1000,
            kept: vec![3, 2],
            left: false,
        };
        assert!(check_outputs("x", &layout, 1, Some(("attention_mask", 4, "int32"))).is_ok());
        assert!(check_outputs("x", &layout, 4, None).is_ok());
        // Values and an int32 mask of 0.6 of the machine each: each fits alone, not both.
        let big = FrameLayout {
            frames: sizes::allocatable_bytes() / 10 * 6 / 4,
            kept: vec![1],
            left: false,
        };
        assert!(check_outputs("x", &big, 1, None).is_ok());
        assert!(matches!(
            check_outputs("x", &big, 1, Some(("attention_mask", 4, "int32"))),
            Err(CollateError::BatchTooLarge { .. })
        ));
    }

    #[test]
    fn longest_pads_raw_audio_on_the_right() {
        let a = [1.0f32, 2.0, 3.0];
        let b = [4.0f64];
        let rows = [FloatRow::F32(&a), FloatRow::F64(&b)];
        let layout = frame_layout("x", &[3, 1], 1, &options(Strategy::Longest)).unwrap();
        assert_eq!(layout.frames, 3);
        let out = pad_frames("x", &rows, 1, &layout, -1.0f32).unwrap();
        assert_eq!(out, vec![1.0, 2.0, 3.0, 4.0, -1.0, -1.0]);
        assert_eq!(frame_mask("m", &layout).unwrap(), vec![1, 1, 1, 1, 0, 0]);
    }

    #[test]
    fn left_padding_and_multiples_of_frames_of_features() {
        let a = [1.0f32, 2.0, 3.0, 4.0];
        let b = [5.0f32, 6.0];
        let rows = [FloatRow::F32(&a), FloatRow::F32(&b)];
        let mut opts = options(Strategy::Longest);
        opts.left = true;
        opts.pad_to_multiple_of = Some(3);
        let layout = frame_layout("x", &[2, 1], 2, &opts).unwrap();
        assert_eq!(layout.frames, 3);
        let out = pad_frames("x", &rows, 2, &layout, 0.5f32).unwrap();
        assert_eq!(
            out,
            vec![0.5, 0.5, 1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 0.5, 0.5, 5.0, 6.0]
        );
        assert_eq!(frame_mask("m", &layout).unwrap(), vec![0, 1, 1, 0, 0, 1]);
    }

    #[test]
    fn truncation_keeps_the_first_frames_then_pads_to_max_length() {
        let a = [1.0f64, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0f64];
        let rows = [FloatRow::F64(&a), FloatRow::F64(&b)];
        let mut opts = options(Strategy::MaxLength(3));
        opts.truncate_to = Some(3);
        let layout = frame_layout("x", &[5, 1], 1, &opts).unwrap();
        assert_eq!(layout.kept, vec![3, 1]);
        let out = pad_frames("x", &rows, 1, &layout, 0.0f32).unwrap();
        assert_eq!(out, vec![1.0, 2.0, 3.0, 6.0, 0.0, 0.0]);
    }

    #[test]
    fn float64_is_rounded_to_float32() {
        let a = [0.1f64];
        let out = pad_frames(
            "x",
            &[FloatRow::F64(&a)],
            1,
            &frame_layout("x", &[1], 1, &options(Strategy::Longest)).unwrap(),
            0.0f32,
        )
        .unwrap();
        assert_eq!(out, vec![0.1f64 as f32]);
    }

    #[test]
    fn errors_name_the_key_and_row() {
        let err = frame_layout("input_values", &[2, 5], 1, &options(Strategy::MaxLength(4)));
        assert_eq!(
            err,
            Err(CollateError::TooLong {
                key: "input_values".into(),
                row: 1,
                length: 5,
                max_length: 4
            })
        );
        let err = frame_layout("input_values", &[2, 2, 3], 1, &options(Strategy::DoNotPad));
        assert!(matches!(err, Err(CollateError::Ragged { row: 2, .. })));
        let mut opts = options(Strategy::Longest);
        opts.pad_to_multiple_of = Some(0);
        assert!(matches!(
            frame_layout("x", &[1], 1, &opts),
            Err(CollateError::InvalidOption(_))
        ));
        let too_large = frame_layout("x", &[usize::MAX / 2, 1], 4, &options(Strategy::Longest));
        assert!(matches!(
            too_large,
            Err(CollateError::OutputTooLarge { .. })
        ));
        // A row with fewer values than its frames need.
        let a = [1.0f32];
        let layout = frame_layout("x", &[2], 1, &options(Strategy::Longest)).unwrap();
        assert!(matches!(
            pad_frames("x", &[FloatRow::F32(&a)], 1, &layout, 0.0f32),
            Err(CollateError::Ragged { row: 0, .. })
        ));
    }

    #[test]
    fn do_not_pad_stacks_rows_of_one_length_and_empty_batches_are_empty() {
        let a = [1.0f32, 2.0];
        let b = [3.0f32, 4.0];
        let layout = frame_layout("x", &[2, 2], 1, &options(Strategy::DoNotPad)).unwrap();
        let rows = [FloatRow::F32(&a), FloatRow::F32(&b)];
        assert_eq!(
            pad_frames("x", &rows, 1, &layout, 9.0f32).unwrap(),
            vec![1.0, 2.0, 3.0, 4.0]
        );
        let layout = frame_layout("x", &[], 1, &options(Strategy::Longest)).unwrap();
        let none: [FloatRow; 0] = [];
        assert!(pad_frames("x", &none, 1, &layout, 0.0f32)
            .unwrap()
            .is_empty());
        // Rows of zero frames.
        let layout = frame_layout("x", &[0, 0], 3, &options(Strategy::Longest)).unwrap();
        let empty: [f32; 0] = [];
        let rows = [FloatRow::F32(&empty), FloatRow::F32(&empty)];
        assert!(pad_frames("x", &rows, 3, &layout, 0.0f32)
            .unwrap()
            .is_empty());
    }
}
