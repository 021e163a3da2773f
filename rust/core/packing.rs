//! Token-budget batches for padding-free training: sequences bin-packed into batches of at most
//! `max_tokens` tokens.
//!
//! The epoch order is a seeded shuffle (deterministic for a seed and epoch). It is cut into
//! windows of `window` sequences; each window is packed best-fit decreasing (longest first,
//! each sequence into the fullest batch it still fits), so batches are drawn from a random
//! slice of the data rather than from one length-sorted pass. The least full batch of a
//! window is not emitted: its sequences join the next window, so only the epoch's very last
//! batches can be part-empty. Batches of a window are emitted in shuffled order.
//!
//! Across `num_replicas` ranks batch `b` goes to rank `b % num_replicas`; every rank gets the
//! same number of batches, by repeating the epoch's first batches (or dropping the last ones
//! with `drop_last`).

use std::collections::BTreeMap;
use std::fmt;

use super::batches::Batches;
use super::rng::{Rng, SplitMix64};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackingError {
    NegativeLength {
        index: usize,
        length: i64,
    },
    /// A sequence longer than the token budget (and truncation was not asked for).
    TooLong {
        index: usize,
        length: i64,
        max_tokens: i64,
    },
    InvalidOption(String),
}

impl fmt::Display for PackingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use PackingError::*;
        match self {
            NegativeLength { index, length } => {
                write!(
                    f,
                    "lengths[{index}] is {length}; lengths must not be negative"
                )
            }
            TooLong {
                index,
                length,
                max_tokens,
            } => write!(
                f,
                "sequence {index} has {length} tokens, more than max_tokens={max_tokens}; \
                 truncate it when tokenizing, raise max_tokens, or pass truncate=True to give \
                 it a batch of its own and cut it to max_tokens in the collator"
            ),
            InvalidOption(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for PackingError {}

#[derive(Debug, Clone, Copy)]
pub struct Packing {
    pub max_tokens: i64,
    /// Sequences per packing window.
    pub window: usize,
    pub shuffle: bool,
    pub seed: u64,
    pub epoch: u64,
    /// Over-long sequences count as `max_tokens` (a batch of their own) instead of an error.
    pub truncate: bool,
}

/// One open batch: its sequences and the tokens it has left.
pub(crate) struct Bin {
    pub(crate) items: Vec<i64>,
    pub(crate) free: i64,
}

/// Best-fit decreasing over `items` (dataset indices): longest first, each into the open bin
/// with the least room that still holds it.
pub(crate) fn best_fit_decreasing(items: &mut [i64], sizes: &[i64], max_tokens: i64) -> Vec<Bin> {
    items.sort_by(|&a, &b| sizes[b as usize].cmp(&sizes[a as usize]));
    let mut bins: Vec<Bin> = Vec::new();
    // free tokens -> bins with exactly that room (the last opened is filled first).
    let mut by_free: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for &item in items.iter() {
        let size = sizes[item as usize];
        let found = by_free
            .range_mut(size..)
            .next()
            .map(|(&free, bins)| (free, bins.pop()));
        let bin = match found {
            Some((free, Some(bin))) => {
                if by_free.get(&free).is_some_and(Vec::is_empty) {
                    by_free.remove(&free);
                }
                bin
            }
            _ => {
                bins.push(Bin {
                    items: Vec::new(),
                    free: max_tokens,
                });
                bins.len() - 1
            }
        };
        bins[bin].items.push(item);
        bins[bin].free -= size;
        by_free.entry(bins[bin].free).or_default().push(bin);
    }
    bins
}

impl Packing {
    /// Token counts used for packing: the lengths, with over-long ones cut to `max_tokens` when
    /// truncating (an error naming the first of them otherwise).
    fn sizes(&self, lengths: &[i64]) -> Result<Vec<i64>, PackingError> {
        lengths
            .iter()
            .enumerate()
            .map(|(index, &length)| {
                if length < 0 {
                    Err(PackingError::NegativeLength { index, length })
                } else if length <= self.max_tokens {
                    Ok(length)
                } else if self.truncate {
                    Ok(self.max_tokens)
                } else {
                    Err(PackingError::TooLong {
                        index,
                        length,
                        max_tokens: self.max_tokens,
                    })
                }
            })
            .collect()
    }

    /// Every batch of the epoch, in order; each index appears in exactly one.
    pub fn epoch(&self, lengths: &[i64]) -> Result<Batches, PackingError> {
        if self.max_tokens < 1 {
            return Err(PackingError::InvalidOption(format!(
                "max_tokens must be at least 1, not {}",
                self.max_tokens
            )));
        }
        if self.window < 1 {
            return Err(PackingError::InvalidOption(format!(
                "window must be at least 1, not {}",
                self.window
            )));
        }
        let sizes = self.sizes(lengths)?;
        let mut rng = SplitMix64::for_epoch(self.seed, self.epoch);
        let mut order: Vec<i64> = (0..lengths.len() as i64).collect();
        if self.shuffle {
            rng.shuffle(&mut order);
        }
        let mut out = Batches::default();
        out.indices.reserve(order.len());
        let mut pool: Vec<i64> = Vec::new();
        let windows = order.chunks(self.window);
        let last = windows.len().saturating_sub(1);
        for (w, chunk) in windows.enumerate() {
            pool.extend_from_slice(chunk);
            let mut bins = best_fit_decreasing(&mut pool, &sizes, self.max_tokens);
            pool.clear();
            if w != last {
                // The least full batch waits for the next window's sequences to fill it.
                if let Some((emptiest, _)) = bins.iter().enumerate().max_by_key(|(i, b)| {
                    (b.free, std::cmp::Reverse(*i)) // ties: the first
                }) {
                    pool = bins.swap_remove(emptiest).items;
                }
            }
            if self.shuffle {
                rng.shuffle(&mut bins);
            }
            for bin in bins {
                out.push(bin.items);
            }
        }
        Ok(out)
    }
}

/// Rank `rank`'s share of `batches`: batches `rank, rank + num_replicas, ...`, every rank the
/// same count — the epoch's first batches repeated to fill the last round, or the last round
/// dropped with `drop_last`.
pub fn shard(
    batches: &Batches,
    num_replicas: usize,
    rank: usize,
    drop_last: bool,
) -> Result<Batches, PackingError> {
    if num_replicas < 1 || rank >= num_replicas {
        return Err(PackingError::InvalidOption(format!(
            "rank {rank} is outside 0..{num_replicas} (num_replicas)"
        )));
    }
    let total = batches.len();
    let per_rank = if drop_last {
        total / num_replicas
    } else {
        total.div_ceil(num_replicas)
    };
    let mut out = Batches::default();
    for step in 0..per_rank {
        let b = step * num_replicas + rank;
        // Past the end only without drop_last, and then total > 0.
        out.push(batches.get(b % total).iter().copied());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packing(max_tokens: i64, window: usize, seed: u64, epoch: u64) -> Packing {
        Packing {
            max_tokens,
            window,
            shuffle: true,
            seed,
            epoch,
            truncate: false,
        }
    }

    fn lengths(n: usize, seed: u64, max: u64) -> Vec<i64> {
        let mut rng = SplitMix64::for_epoch(seed, 0);
        (0..n).map(|_| 1 + rng.below(max) as i64).collect()
    }

    #[test]
    fn batches_fit_and_cover_every_index_once() {
        for (n, window) in [(0usize, 7usize), (1, 1), (50, 7), (1000, 64), (1000, 5000)] {
            let lengths = lengths(n, 3, 300);
            let batches = packing(512, window, 1, 0).epoch(&lengths).unwrap();
            for batch in batches.iter() {
                assert!(!batch.is_empty());
                assert!(batch.iter().map(|&i| lengths[i as usize]).sum::<i64>() <= 512);
            }
            let mut seen = batches.indices.clone();
            seen.sort();
            assert_eq!(seen, (0..n as i64).collect::<Vec<_>>());
        }
    }

    #[test]
    fn deterministic_per_seed_and_epoch() {
        let lengths = lengths(2000, 5, 200);
        let a = packing(1024, 256, 7, 0).epoch(&lengths).unwrap();
        assert_eq!(a, packing(1024, 256, 7, 0).epoch(&lengths).unwrap());
        assert_ne!(a, packing(1024, 256, 7, 1).epoch(&lengths).unwrap());
        assert_ne!(a, packing(1024, 256, 8, 0).epoch(&lengths).unwrap());
        let unshuffled = Packing {
            shuffle: false,
            ..packing(1024, 256, 7, 0)
        };
        let b = unshuffled.epoch(&lengths).unwrap();
        assert_eq!(
            b,
            Packing {
                seed: 99,
                epoch: 4,
                ..unshuffled
            }
            .epoch(&lengths)
            .unwrap()
        );
    }

    #[test]
    fn small_sequences_fill_batches() {
        let lengths = lengths(20_000, 11, 100);
        let batches = packing(4096, 2048, 0, 0).epoch(&lengths).unwrap();
        let total: i64 = lengths.iter().sum();
        // At most one batch more than the token count needs, however the windows fell.
        let fewest = (total as usize).div_ceil(4096);
        assert!(
            batches.len() <= fewest + 1,
            "{} > {fewest} + 1",
            batches.len()
        );
    }

    #[test]
    fn over_long_sequences() {
        let p = packing(10, 4, 0, 0);
        assert_eq!(
            p.epoch(&[3, 11, 12]),
            Err(PackingError::TooLong {
                index: 1,
                length: 11,
                max_tokens: 10
            })
        );
        let batches = Packing {
            truncate: true,
            ..p
        }
        .epoch(&[3, 11, 12])
        .unwrap();
        assert_eq!(batches.len(), 3);
        assert_eq!(
            p.epoch(&[1, -1]),
            Err(PackingError::NegativeLength {
                index: 1,
                length: -1
            })
        );
        assert!(packing(0, 1, 0, 0).epoch(&[]).is_err());
        assert!(packing(1, 0, 0, 0).epoch(&[]).is_err());
    }

    #[test]
    fn shards_are_equal_and_disjoint_until_the_padding() {
        let lengths = lengths(777, 2, 300);
        let all = packing(600, 100, 0, 0).epoch(&lengths).unwrap();
        for replicas in [1usize, 2, 3, 5] {
            let shards: Vec<Batches> = (0..replicas)
                .map(|r| shard(&all, replicas, r, false).unwrap())
                .collect();
            let per_rank = all.len().div_ceil(replicas);
            assert!(shards.iter().all(|s| s.len() == per_rank));
            let mut seen: Vec<i64> = shards.iter().flat_map(|s| s.indices.clone()).collect();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), lengths.len());
            let dropped: Vec<Batches> = (0..replicas)
                .map(|r| shard(&all, replicas, r, true).unwrap())
                .collect();
            assert!(dropped.iter().all(|s| s.len() == all.len() / replicas));
        }
        assert!(shard(&all, 2, 2, false).is_err());
        assert_eq!(shard(&Batches::default(), 2, 1, false).unwrap().len(), 0);
    }
}
