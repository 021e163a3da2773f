//! Length-grouped batches over a stream, one bounded buffer at a time (`LengthGroupedStream`).
//!
//! The buffer plays the part of a mega-batch in transformers' `group_by_length`: its rows are
//! shuffled, sorted by length (longest first) and cut into batches of `batch_size` rows, and the
//! batches are emitted in shuffled order. A buffer that does not divide into whole batches
//! hands back the rows left over (taken at random, before the sort) to be read into the next
//! buffer, so only the stream's last buffer can emit a short batch; that batch is emitted last,
//! for the caller to drop when it drops incomplete batches. The shuffles are keyed on (seed,
//! epoch, buffer number): every reader of the same stream makes the same batches.

use super::batches::Batches;
use super::packing::PackingError;
use super::rng::{Rng, SplitMix64};

/// 2^64 divided by the golden ratio: spreads buffer numbers over the seed space.
const BUFFER_STRIDE: u64 = 0x9e37_79b9_7f4a_7c15;

/// How one buffer is grouped.
#[derive(Debug, Clone, Copy)]
pub struct BufferGrouping {
    pub batch_size: i64,
    /// The stream is exhausted: emit every row, a short last batch too.
    pub last: bool,
    pub seed: u64,
    pub epoch: u64,
    /// Which buffer of the epoch this is (0, 1, ...).
    pub buffer_number: u64,
}

/// A grouped buffer: the batches to emit now (buffer positions, in emission order; a short
/// batch, only in the last buffer, comes last) and the positions carried into the next buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupedBuffer {
    pub batches: Batches,
    pub carried: Vec<i64>,
}

impl BufferGrouping {
    /// Groups the rows whose lengths are `lengths` (position `i` is the buffer's row `i`).
    pub fn group(&self, lengths: &[i64]) -> Result<GroupedBuffer, PackingError> {
        if self.batch_size < 1 {
            return Err(PackingError::InvalidOption(format!(
                "batch_size must be at least 1, not {}",
                self.batch_size
            )));
        }
        if let Some((index, &length)) = lengths.iter().enumerate().find(|(_, &l)| l < 0) {
            return Err(PackingError::NegativeLength { index, length });
        }
        // batch_size >= 1 and fits a usize wherever the buffer's rows do; larger means one
        // (short) batch, which min() gives without converting.
        let batch_size = usize::try_from(self.batch_size).unwrap_or(usize::MAX);
        let mut rng = SplitMix64::for_epoch(
            self.seed
                .wrapping_add(self.buffer_number.wrapping_mul(BUFFER_STRIDE)),
            self.epoch,
        );
        let mut items: Vec<i64> = (0..lengths.len() as i64).collect();
        rng.shuffle(&mut items);
        let carried = if self.last {
            Vec::new()
        } else {
            let whole = items.len() - items.len() % batch_size;
            items.split_off(whole)
        };
        // Stable: rows of equal length stay in their shuffled order.
        items.sort_by_key(|&i| std::cmp::Reverse(lengths[i as usize]));
        let mut full: Vec<&[i64]> = Vec::with_capacity(items.len() / batch_size + 1);
        let mut short: Option<&[i64]> = None;
        for chunk in items.chunks(batch_size) {
            if chunk.len() == batch_size {
                full.push(chunk);
            } else {
                short = Some(chunk);
            }
        }
        rng.shuffle(&mut full);
        let mut batches = Batches::default();
        batches.indices.reserve(items.len());
        for chunk in full.into_iter().chain(short) {
            batches.push(chunk.iter().copied());
        }
        Ok(GroupedBuffer { batches, carried })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(batch_size: i64, last: bool, buffer_number: u64) -> BufferGrouping {
        BufferGrouping {
            batch_size,
            last,
            seed: 5,
            epoch: 0,
            buffer_number,
        }
    }

    fn lengths(n: usize, seed: u64, max: u64) -> Vec<i64> {
        let mut rng = SplitMix64::for_epoch(seed, 0);
        (0..n).map(|_| 1 + rng.below(max) as i64).collect()
    }

    fn covers(n: usize, grouped: &GroupedBuffer) {
        let mut seen = grouped.batches.indices.clone();
        seen.extend(&grouped.carried);
        seen.sort();
        assert_eq!(seen, (0..n as i64).collect::<Vec<_>>());
    }

    #[test]
    fn every_row_once_in_whole_batches() {
        for (n, batch_size, last) in [
            (0usize, 4i64, true),
            (0, 4, false),
            (3, 4, false),
            (3, 4, true),
            (103, 8, false),
            (103, 8, true),
            (96, 8, false),
            (5, i64::MAX, true),
        ] {
            let lengths = lengths(n, 1, 500);
            let grouped = plan(batch_size, last, 0).group(&lengths).unwrap();
            covers(n, &grouped);
            let sizes: Vec<usize> = grouped.batches.iter().map(|b| b.len()).collect();
            let size = usize::try_from(batch_size).unwrap();
            let expected = if last { n.div_ceil(size) } else { n / size };
            if last {
                assert!(grouped.carried.is_empty());
                // Only the last batch can be short.
                for &size in sizes.iter().rev().skip(1) {
                    assert_eq!(size as i64, batch_size);
                }
            } else {
                assert!(sizes.iter().all(|&s| s as i64 == batch_size));
                assert_eq!(grouped.carried.len() as i64, n as i64 % batch_size);
            }
            assert_eq!(sizes.len(), expected);
        }
    }

    #[test]
    fn batches_are_runs_of_the_sorted_buffer() {
        let lengths = lengths(400, 2, 1000);
        let grouped = plan(10, true, 0).group(&lengths).unwrap();
        // Sorted longest first and cut in order: the batches' length ranges do not overlap.
        let mut ranges: Vec<(i64, i64)> = grouped
            .batches
            .iter()
            .map(|b| {
                let l: Vec<i64> = b.iter().map(|&i| lengths[i as usize]).collect();
                (*l.iter().min().unwrap(), *l.iter().max().unwrap())
            })
            .collect();
        ranges.sort();
        for pair in ranges.windows(2) {
            assert!(pair[0].1 <= pair[1].0);
        }
        // ... and they are not emitted in length order.
        let maxima: Vec<i64> = grouped
            .batches
            .iter()
            .map(|b| b.iter().map(|&i| lengths[i as usize]).max().unwrap())
            .collect();
        let mut sorted = maxima.clone();
        sorted.sort_by_key(|&m| std::cmp::Reverse(m));
        assert_ne!(maxima, sorted);
    }

    #[test]
    fn the_carried_rows_are_random_not_the_shortest() {
        let lengths: Vec<i64> = (0..1000).collect();
        let grouped = plan(100, false, 0).group(&lengths[..999]).unwrap();
        assert_eq!(grouped.carried.len(), 99);
        let mean = grouped.carried.iter().sum::<i64>() / 99;
        assert!((250..750).contains(&mean), "mean {mean}");
    }

    #[test]
    fn keyed_on_seed_epoch_and_buffer() {
        let lengths = lengths(300, 4, 50);
        let a = plan(8, false, 0).group(&lengths).unwrap();
        assert_eq!(a, plan(8, false, 0).group(&lengths).unwrap());
        assert_ne!(a, plan(8, false, 1).group(&lengths).unwrap());
        let other_epoch = BufferGrouping {
            epoch: 1,
            ..plan(8, false, 0)
        };
        assert_ne!(a, other_epoch.group(&lengths).unwrap());
    }

    #[test]
    fn bad_input() {
        assert_eq!(
            plan(2, true, 0).group(&[1, -2]),
            Err(PackingError::NegativeLength {
                index: 1,
                length: -2
            })
        );
        assert!(plan(0, true, 0).group(&[1]).is_err());
        assert!(plan(-3, true, 0).group(&[]).is_err());
    }
}
