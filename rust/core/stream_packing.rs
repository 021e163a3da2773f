//! Token-budget batches over a stream, one bounded buffer at a time (`PackedStream`).
//!
//! A stream has no length and no random access, so the rows are packed as they arrive: the
//! caller fills a buffer with the rows read so far and asks for its batches. The buffer is
//! packed best-fit decreasing (as `packing` packs a window); its least full batch is handed
//! back rather than emitted, and its rows go into the next buffer to be topped up there, so
//! only the stream's last buffer can emit part-empty batches. Ties between equal lengths and
//! the order of the emitted batches are shuffled by a generator keyed on (seed, epoch, buffer
//! number): every reader of the same stream makes the same batches.

use super::batches::Batches;
use super::packing::{best_fit_decreasing, PackingError};
use super::rng::{Rng, SplitMix64};

/// 2^64 divided by the golden ratio: spreads buffer numbers over the seed space.
const BUFFER_STRIDE: u64 = 0x9e37_79b9_7f4a_7c15;

/// How one buffer is packed.
#[derive(Debug, Clone, Copy)]
pub struct BufferPacking {
    pub max_tokens: i64,
    /// Over-long rows count as `max_tokens` (a batch of their own) instead of an error.
    pub truncate: bool,
    /// The stream is exhausted: emit every batch, the least full one too.
    pub last: bool,
    pub seed: u64,
    pub epoch: u64,
    /// Which buffer of the epoch this is (0, 1, ...).
    pub buffer_number: u64,
}

/// A packed buffer: the batches to emit now (buffer positions, in emission order) and the
/// positions of the rows carried into the next buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedBuffer {
    pub batches: Batches,
    pub carried: Vec<i64>,
}

impl BufferPacking {
    /// Packs the rows whose token counts are `lengths` (position `i` is the buffer's row `i`).
    pub fn pack(&self, lengths: &[i64]) -> Result<PackedBuffer, PackingError> {
        if self.max_tokens < 1 {
            return Err(PackingError::InvalidOption(format!(
                "max_tokens must be at least 1, not {}",
                self.max_tokens
            )));
        }
        let mut sizes = Vec::with_capacity(lengths.len());
        for (index, &length) in lengths.iter().enumerate() {
            if length < 0 {
                return Err(PackingError::NegativeLength { index, length });
            }
            if length > self.max_tokens && !self.truncate {
                return Err(PackingError::TooLong {
                    index,
                    length,
                    max_tokens: self.max_tokens,
                });
            }
            sizes.push(length.min(self.max_tokens));
        }
        let mut rng = SplitMix64::for_epoch(
            self.seed
                .wrapping_add(self.buffer_number.wrapping_mul(BUFFER_STRIDE)),
            self.epoch,
        );
        // Shuffled first, so that rows of equal length land in random batches (the sort in
        // best-fit decreasing is stable).
        let mut items: Vec<i64> = (0..lengths.len() as i64).collect();
        rng.shuffle(&mut items);
        let mut bins = best_fit_decreasing(&mut items, &sizes, self.max_tokens);
        let mut carried = Vec::new();
        // With a single batch, carrying it would leave no room for new rows: it is emitted.
        if !self.last && bins.len() > 1 {
            if let Some((emptiest, _)) = bins
                .iter()
                .enumerate()
                .max_by_key(|(i, b)| (b.free, std::cmp::Reverse(*i)))
            {
                carried = bins.swap_remove(emptiest).items;
            }
        }
        rng.shuffle(&mut bins);
        let mut batches = Batches::default();
        batches.indices.reserve(lengths.len());
        for bin in bins {
            batches.push(bin.items);
        }
        Ok(PackedBuffer { batches, carried })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(max_tokens: i64, last: bool, buffer_number: u64) -> BufferPacking {
        BufferPacking {
            max_tokens,
            truncate: false,
            last,
            seed: 3,
            epoch: 0,
            buffer_number,
        }
    }

    fn lengths(n: usize, seed: u64, max: u64) -> Vec<i64> {
        let mut rng = SplitMix64::for_epoch(seed, 0);
        (0..n).map(|_| 1 + rng.below(max) as i64).collect()
    }

    fn budget_and_cover(lengths: &[i64], packed: &PackedBuffer, max_tokens: i64) {
        for batch in packed.batches.iter() {
            assert!(!batch.is_empty());
            assert!(batch.iter().map(|&i| lengths[i as usize]).sum::<i64>() <= max_tokens);
        }
        let mut seen = packed.batches.indices.clone();
        seen.extend(&packed.carried);
        seen.sort();
        assert_eq!(seen, (0..lengths.len() as i64).collect::<Vec<_>>());
    }

    #[test]
    fn every_row_once_within_budget() {
        for (n, last) in [
            (0usize, true),
            (0, false),
            (1, false),
            (1, true),
            (500, false),
        ] {
            let lengths = lengths(n, 1, 300);
            let packed = plan(512, last, 0).pack(&lengths).unwrap();
            budget_and_cover(&lengths, &packed, 512);
            if last || n <= 1 {
                assert!(packed.carried.is_empty());
            }
        }
    }

    #[test]
    fn the_least_full_batch_is_carried() {
        let lengths = lengths(400, 2, 200);
        let packed = plan(1000, false, 0).pack(&lengths).unwrap();
        budget_and_cover(&lengths, &packed, 1000);
        let carried: i64 = packed.carried.iter().map(|&i| lengths[i as usize]).sum();
        assert!(!packed.carried.is_empty());
        for batch in packed.batches.iter() {
            assert!(batch.iter().map(|&i| lengths[i as usize]).sum::<i64>() >= carried);
        }
    }

    #[test]
    fn a_single_batch_is_emitted_not_carried() {
        let packed = plan(100, false, 0).pack(&[1, 2, 3]).unwrap();
        assert_eq!(packed.batches.len(), 1);
        assert!(packed.carried.is_empty());
    }

    #[test]
    fn keyed_on_seed_epoch_and_buffer() {
        let lengths = lengths(300, 4, 50);
        let a = plan(256, false, 0).pack(&lengths).unwrap();
        assert_eq!(a, plan(256, false, 0).pack(&lengths).unwrap());
        assert_ne!(a, plan(256, false, 1).pack(&lengths).unwrap());
        let other_epoch = BufferPacking {
            epoch: 1,
            ..plan(256, false, 0)
        };
        assert_ne!(a, other_epoch.pack(&lengths).unwrap());
    }

    #[test]
    fn over_long_rows() {
        assert_eq!(
            plan(10, true, 0).pack(&[3, 11]),
            Err(PackingError::TooLong {
                index: 1,
                length: 11,
                max_tokens: 10
            })
        );
        let cut = BufferPacking {
            truncate: true,
            ..plan(10, true, 0)
        }
        .pack(&[3, 11, 12])
        .unwrap();
        assert_eq!(cut.batches.len(), 3);
        assert_eq!(
            plan(10, true, 0).pack(&[1, -2]),
            Err(PackingError::NegativeLength {
                index: 1,
                length: -2
            })
        );
        assert!(plan(0, true, 0).pack(&[]).is_err());
    }
}
