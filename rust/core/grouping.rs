//! Length grouping, the deterministic part of transformers' `get_length_grouped_indices`.
//!
//! The random permutation stays in Python (`torch.randperm`, so the torch RNG stream is consumed
//! exactly as transformers consumes it); this module splits it into mega-batches, sorts each one
//! longest first with a *stable* sort (Python's `sorted(..., reverse=True)` keeps equal lengths
//! in permutation order) and swaps the overall longest item to the front.

use std::fmt;

/// transformers caps the default mega-batch multiplier at 50.
const MAX_DEFAULT_MEGA_BATCH_MULT: usize = 50;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupingError {
    /// `batch_size` below 1.
    BatchSize(i64),
    /// `mega_batch_mult` below 1.
    MegaBatchMult(i64),
    /// A negative length.
    NegativeLength { index: usize, length: i64 },
    /// The permutation does not have one entry per length.
    PermutationSize { permutation: usize, lengths: usize },
    /// A permutation entry outside `0..lengths`.
    PermutationIndex {
        position: usize,
        value: i64,
        lengths: usize,
    },
    /// `batch_size * mega_batch_mult` does not fit in memory's index type.
    Overflow,
}

impl fmt::Display for GroupingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GroupingError::*;
        match self {
            BatchSize(value) => write!(f, "batch_size must be at least 1, not {value}"),
            MegaBatchMult(value) => write!(f, "mega_batch_mult must be at least 1, not {value}"),
            NegativeLength { index, length } => write!(
                f,
                "lengths[{index}] is {length}; sequence lengths cannot be negative"
            ),
            PermutationSize {
                permutation,
                lengths,
            } => write!(
                f,
                "the permutation holds {permutation} indices but there are {lengths} lengths"
            ),
            PermutationIndex {
                position,
                value,
                lengths,
            } => write!(
                f,
                "permutation[{position}] is {value}, outside 0..{lengths}"
            ),
            Overflow => write!(f, "batch_size * mega_batch_mult is too large"),
        }
    }
}

impl std::error::Error for GroupingError {}

/// transformers' default: `min(n // (batch_size * 4), 50)`, at least 1.
pub fn default_mega_batch_mult(n: usize, batch_size: usize) -> usize {
    let per_quarter = batch_size.checked_mul(4).map_or(0, |b| n / b);
    per_quarter.clamp(1, MAX_DEFAULT_MEGA_BATCH_MULT)
}

/// Checks the arguments of [`group_by_length`] without grouping anything.
pub fn validate(
    lengths: &[i64],
    permutation: &[i64],
    batch_size: i64,
    mega_batch_mult: Option<i64>,
) -> Result<(), GroupingError> {
    if batch_size < 1 {
        return Err(GroupingError::BatchSize(batch_size));
    }
    if let Some(mult) = mega_batch_mult {
        if mult < 1 {
            return Err(GroupingError::MegaBatchMult(mult));
        }
    }
    if let Some(index) = lengths.iter().position(|&l| l < 0) {
        return Err(GroupingError::NegativeLength {
            index,
            length: lengths[index],
        });
    }
    if permutation.len() != lengths.len() {
        return Err(GroupingError::PermutationSize {
            permutation: permutation.len(),
            lengths: lengths.len(),
        });
    }
    let n = lengths.len() as i64;
    if let Some(position) = permutation.iter().position(|&p| p < 0 || p >= n) {
        return Err(GroupingError::PermutationIndex {
            position,
            value: permutation[position],
            lengths: lengths.len(),
        });
    }
    Ok(())
}

/// Below this many indices the mega-batches are sorted on the calling thread.
const PARALLEL_THRESHOLD: usize = 1 << 17;

/// Reusable buffers for sorting mega-batches.
#[derive(Default)]
struct Scratch {
    keys: Vec<u64>,
    original: Vec<i64>,
}

/// Sorts one mega-batch longest first, keeping equal lengths in their current order.
fn sort_longest_first(chunk: &mut [i64], lengths: &[i64], scratch: &mut Scratch) {
    // Every index was checked to lie in 0..lengths.len().
    let length = |i: i64| lengths[i as usize];
    let max_length = chunk.iter().map(|&i| length(i)).max().unwrap_or(0);
    if max_length <= u32::MAX as i64 && chunk.len() <= u32::MAX as usize {
        // Pack (inverted length, position) into one u64: an unstable sort of distinct keys is
        // as stable as a stable sort of lengths, and cheaper.
        scratch.keys.clear();
        scratch.keys.extend(
            chunk.iter().enumerate().map(|(position, &i)| {
                ((u32::MAX as u64 - length(i) as u64) << 32) | position as u64
            }),
        );
        scratch.keys.sort_unstable();
        scratch.original.clear();
        scratch.original.extend_from_slice(chunk);
        for (slot, key) in chunk.iter_mut().zip(scratch.keys.iter()) {
            *slot = scratch.original[(key & u32::MAX as u64) as usize];
        }
    } else {
        chunk.sort_by_key(|&i| std::cmp::Reverse(length(i)));
    }
}

/// Sorts every mega-batch of `indices`; on several threads when there are many.
fn sort_mega_batches(indices: &mut [i64], lengths: &[i64], mega_batch_size: usize) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunks = indices.len().div_ceil(mega_batch_size);
    if threads < 2 || chunks < 2 || indices.len() < PARALLEL_THRESHOLD {
        let mut scratch = Scratch::default();
        for chunk in indices.chunks_mut(mega_batch_size) {
            sort_longest_first(chunk, lengths, &mut scratch);
        }
        return;
    }
    // Whole mega-batches per thread, so no mega-batch straddles two threads.
    let per_thread = chunks.div_ceil(threads) * mega_batch_size;
    std::thread::scope(|scope| {
        for part in indices.chunks_mut(per_thread) {
            scope.spawn(move || {
                let mut scratch = Scratch::default();
                for chunk in part.chunks_mut(mega_batch_size) {
                    sort_longest_first(chunk, lengths, &mut scratch);
                }
            });
        }
    });
}

/// Groups `permutation` (a random permutation of `0..lengths.len()`) by length: mega-batches of
/// `mega_batch_mult * batch_size` indices, each sorted longest first (stable), and the first
/// element of the mega-batch holding the longest item swapped with the very first element.
/// The same indices as transformers' `get_length_grouped_indices` for the same permutation.
pub fn group_by_length(
    lengths: &[i64],
    permutation: &[i64],
    batch_size: i64,
    mega_batch_mult: Option<i64>,
) -> Result<Vec<i64>, GroupingError> {
    validate(lengths, permutation, batch_size, mega_batch_mult)?;
    let batch_size = usize::try_from(batch_size).map_err(|_| GroupingError::Overflow)?;
    let mult = match mega_batch_mult {
        Some(mult) => usize::try_from(mult).map_err(|_| GroupingError::Overflow)?,
        None => default_mega_batch_mult(lengths.len(), batch_size),
    };
    let mega_batch_size = mult
        .checked_mul(batch_size)
        .ok_or(GroupingError::Overflow)?;
    let mut indices = permutation.to_vec();
    if indices.is_empty() {
        return Ok(indices);
    }
    sort_mega_batches(&mut indices, lengths, mega_batch_size);
    // torch.argmax returns the first maximum: only a strictly longer head replaces it.
    let mut longest = (0, lengths[indices[0] as usize]);
    for (chunk_index, chunk) in indices.chunks(mega_batch_size).enumerate().skip(1) {
        let head = lengths[chunk[0] as usize];
        if head > longest.1 {
            longest = (chunk_index, head);
        }
    }
    indices.swap(0, longest.0 * mega_batch_size);
    Ok(indices)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// transformers' algorithm written the obvious way, as the reference.
    fn reference(lengths: &[i64], permutation: &[i64], batch_size: usize, mult: usize) -> Vec<i64> {
        let size = mult * batch_size;
        let mut megabatches: Vec<Vec<i64>> = permutation
            .chunks(size)
            .map(|c| {
                let mut c = c.to_vec();
                c.sort_by(|&a, &b| lengths[b as usize].cmp(&lengths[a as usize]));
                c
            })
            .collect();
        let maxima: Vec<i64> = megabatches.iter().map(|m| lengths[m[0] as usize]).collect();
        let mut max_idx = 0;
        for (i, &m) in maxima.iter().enumerate() {
            if m > maxima[max_idx] {
                max_idx = i;
            }
        }
        let tmp = megabatches[0][0];
        megabatches[0][0] = megabatches[max_idx][0];
        megabatches[max_idx][0] = tmp;
        megabatches.concat()
    }

    /// A small deterministic generator, so the tests need no dependency.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
        fn permutation(&mut self, n: usize) -> Vec<i64> {
            let mut p: Vec<i64> = (0..n as i64).collect();
            for i in (1..n).rev() {
                let j = (self.next() % (i as u64 + 1)) as usize;
                p.swap(i, j);
            }
            p
        }
    }

    #[test]
    fn default_mult_follows_transformers() {
        assert_eq!(default_mega_batch_mult(0, 4), 1);
        assert_eq!(default_mega_batch_mult(15, 4), 1);
        assert_eq!(default_mega_batch_mult(32, 4), 2);
        assert_eq!(default_mega_batch_mult(1_000_000, 4), 50);
        assert_eq!(default_mega_batch_mult(10, usize::MAX), 1);
    }

    #[test]
    fn matches_reference_with_many_ties() {
        let mut rng = Lcg(7);
        for n in [1usize, 2, 3, 7, 16, 33, 100, 257, 1000] {
            for batch_size in [1usize, 2, 3, 8] {
                for max_len in [1u64, 3, 50] {
                    let lengths: Vec<i64> = (0..n).map(|_| (rng.next() % max_len) as i64).collect();
                    let perm = rng.permutation(n);
                    let mult = default_mega_batch_mult(n, batch_size);
                    let got = group_by_length(&lengths, &perm, batch_size as i64, None).unwrap();
                    assert_eq!(got, reference(&lengths, &perm, batch_size, mult), "n={n}");
                    let got = group_by_length(&lengths, &perm, batch_size as i64, Some(3)).unwrap();
                    assert_eq!(got, reference(&lengths, &perm, batch_size, 3), "n={n}");
                }
            }
        }
    }

    #[test]
    fn large_inputs_sorted_on_threads_match_reference() {
        let mut rng = Lcg(11);
        let n = PARALLEL_THRESHOLD * 2 + 12_345;
        let lengths: Vec<i64> = (0..n).map(|_| (rng.next() % 512) as i64).collect();
        let perm = rng.permutation(n);
        for (batch_size, mult) in [(8usize, None), (3, Some(7i64)), (1, Some(1))] {
            let got = group_by_length(&lengths, &perm, batch_size as i64, mult).unwrap();
            let mult = mult.map_or(default_mega_batch_mult(n, batch_size), |m| m as usize);
            assert_eq!(got, reference(&lengths, &perm, batch_size, mult));
        }
    }

    #[test]
    fn huge_lengths_take_the_stable_sort() {
        let lengths = vec![5, i64::MAX, 5, 1 << 40, 0, 1 << 40];
        let perm = vec![4, 0, 5, 2, 1, 3];
        let got = group_by_length(&lengths, &perm, 1, Some(3)).unwrap();
        assert_eq!(got, reference(&lengths, &perm, 1, 3));
        assert_eq!(got[0], 1);
    }

    #[test]
    fn longest_item_goes_first() {
        // Mega-batches of 2: [0, 1] [2, 3] [4]; the longest (index 4) lives in the last one.
        let lengths = vec![1, 2, 3, 4, 9];
        let perm = vec![0, 1, 2, 3, 4];
        let got = group_by_length(&lengths, &perm, 1, Some(2)).unwrap();
        assert_eq!(got, vec![4, 0, 3, 2, 1]);
    }

    #[test]
    fn empty_input_gives_empty_output() {
        assert_eq!(
            group_by_length(&[], &[], 4, None).unwrap(),
            Vec::<i64>::new()
        );
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert_eq!(
            group_by_length(&[1], &[0], 0, None),
            Err(GroupingError::BatchSize(0))
        );
        assert_eq!(
            group_by_length(&[1], &[0], 1, Some(0)),
            Err(GroupingError::MegaBatchMult(0))
        );
        assert_eq!(
            group_by_length(&[1, -2], &[0, 1], 1, None),
            Err(GroupingError::NegativeLength {
                index: 1,
                length: -2
            })
        );
        assert_eq!(
            group_by_length(&[1, 2], &[0], 1, None),
            Err(GroupingError::PermutationSize {
                permutation: 1,
                lengths: 2
            })
        );
        assert_eq!(
            group_by_length(&[1, 2], &[0, 2], 1, None),
            Err(GroupingError::PermutationIndex {
                position: 1,
                value: 2,
                lengths: 2
            })
        );
        assert_eq!(
            group_by_length(&[1, 2], &[0, 1], i64::MAX, Some(i64::MAX)),
            Err(GroupingError::Overflow)
        );
        assert!(GroupingError::NegativeLength {
            index: 3,
            length: -1
        }
        .to_string()
        .contains("lengths[3]"));
    }
}
