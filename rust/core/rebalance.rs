//! Cost-balanced micro-batches across data-parallel ranks: the same micro-batches as
//! transformers 5.23's `BatchRebalanceSampler` for the same epoch order.
//!
//! Per optimizer step, `effective_batch_size` indices of the epoch order are sorted longest
//! first (stably) and cut into `K = dp_size * grad_accum` contiguous groups. Hill climbing moves
//! one sample at a time from the most to the least expensive group, where a group of `bs`
//! samples padded to `max_len` costs `bs*max_len + 0.001*bs*max_len²`; groups that can give no
//! more are frozen with their slot. The groups are then dealt by descending cost: slot `s`
//! (gradient-accumulation step) of rank `r` gets the group ranked `s*dp_size + r`.
//!
//! Floating-point costs are computed in the same operation order as transformers' Python, so
//! every comparison (and so every move) comes out the same.

use std::collections::HashSet;
use std::fmt;

use super::batches::Batches;

/// Weight of attention's quadratic term in the cost model (transformers' constant).
const QUADRATIC_COST_COEF: f64 = 0.001;
/// Iteration floor of the hill climbing per group (transformers' `K * 30`).
const ITERATIONS_PER_GROUP: usize = 30;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebalanceError {
    NegativeLength {
        index: usize,
        length: i64,
    },
    OrderSize {
        order: usize,
        lengths: usize,
    },
    OrderIndex {
        position: usize,
        value: i64,
        lengths: usize,
    },
    InvalidOption(String),
    /// Too large to count (sizes past the address space).
    Overflow,
}

impl fmt::Display for RebalanceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RebalanceError::*;
        match self {
            NegativeLength { index, length } => {
                write!(
                    f,
                    "lengths[{index}] is {length}; lengths must not be negative"
                )
            }
            OrderSize { order, lengths } => write!(
                f,
                "the epoch order holds {order} indices but there are {lengths} lengths"
            ),
            OrderIndex {
                position,
                value,
                lengths,
            } => write!(
                f,
                "the epoch order holds {value} at position {position}, outside 0..{lengths}"
            ),
            InvalidOption(message) => write!(f, "{message}"),
            Overflow => write!(f, "sizes too large to count"),
        }
    }
}

impl std::error::Error for RebalanceError {}

/// The sampler's fixed arguments.
#[derive(Debug, Clone, Copy)]
pub struct Rebalance {
    pub effective_batch_size: usize,
    pub dp_size: usize,
    pub grad_accum: usize,
    pub drop_last: bool,
}

/// `bs*max_len + 0.001*bs*max_len*max_len`, evaluated as Python evaluates it: the integer
/// product is rounded to a float once, the quadratic term multiplied left to right.
fn cost(bs: usize, max_len: i64) -> f64 {
    let linear = (bs as i128 * max_len as i128) as f64;
    linear + QUADRATIC_COST_COEF * bs as f64 * max_len as f64 * max_len as f64
}

/// Costs of the contiguous groups that `counts` cuts `sorted_lengths` (longest first) into.
fn group_costs(sorted_lengths: &[i64], counts: &[usize], costs: &mut Vec<f64>) {
    costs.clear();
    let mut start = 0;
    for &count in counts {
        costs.push(if count == 0 {
            0.0
        } else {
            cost(count, sorted_lengths[start])
        });
        start += count;
    }
}

/// First index of the smallest value among `candidates` (Python's `min` keeps the first).
fn first_min(candidates: impl Iterator<Item = usize>, costs: &[f64]) -> Option<usize> {
    candidates.fold(None, |best, i| match best {
        Some(b) if costs[b] <= costs[i] => Some(b),
        _ => Some(i),
    })
}

/// The order in which CPython iterates a `set` built by adding `values` one by one (small
/// non-negative ints, whose hash is themselves): slot order of its open-addressing table.
/// transformers walks a set of group ids, and the walk order decides which groups are topped
/// up first, so it is reproduced exactly: a table of 8 slots, linear probes of 9 then
/// perturbed jumps, resized to the next power of two above 4×used when 3/5 full.
fn cpython_set_order(values: &[usize]) -> Vec<usize> {
    const MIN_SIZE: usize = 8;
    const LINEAR_PROBES: usize = 9;
    const PERTURB_SHIFT: u32 = 5;
    fn insert(table: &mut [Option<usize>], value: usize) {
        let mask = table.len() - 1;
        let mut i = value & mask;
        let mut perturb = value;
        loop {
            let probes = if i + LINEAR_PROBES <= mask {
                LINEAR_PROBES
            } else {
                0
            };
            if let Some(slot) = table[i..=i + probes].iter_mut().find(|s| s.is_none()) {
                *slot = Some(value);
                return;
            }
            perturb >>= PERTURB_SHIFT;
            i = (i.wrapping_mul(5).wrapping_add(1).wrapping_add(perturb)) & mask;
        }
    }
    let mut table: Vec<Option<usize>> = vec![None; MIN_SIZE];
    let mut used = 0usize;
    for &value in values {
        if table.contains(&Some(value)) {
            continue;
        }
        insert(&mut table, value);
        used += 1;
        let mask = table.len() - 1;
        if used * 5 >= mask * 3 {
            let min_used = if used > 50_000 { used * 2 } else { used * 4 };
            let mut size = MIN_SIZE;
            while size <= min_used {
                size <<= 1;
            }
            let old = std::mem::replace(&mut table, vec![None; size]);
            for value in old.into_iter().flatten() {
                insert(&mut table, value);
            }
        }
    }
    table.into_iter().flatten().collect()
}

struct Balancer<'a> {
    sorted_lengths: &'a [i64],
    dp_size: usize,
    counts: Vec<usize>,
    frozen: Vec<bool>,
    costs: Vec<f64>,
}

impl Balancer<'_> {
    /// The groups sharing `pivot`'s slot when all groups are ranked by cost, highest first.
    fn slot_members(&self, pivot: usize) -> Vec<usize> {
        let groups = self.counts.len();
        let mut ranking: Vec<usize> = (0..groups).collect();
        ranking.sort_by(|&a, &b| self.costs[b].total_cmp(&self.costs[a]));
        let rank = ranking.iter().position(|&g| g == pivot).unwrap_or(0);
        let start = rank / self.dp_size * self.dp_size;
        ranking[start..(start + self.dp_size).min(groups)].to_vec()
    }

    /// `pivot` is the dearest group and is down to one sample: top up the other groups of its
    /// slot from the cheapest groups outside it (never past `pivot`'s cost), then freeze the
    /// whole slot.
    fn relieve_and_freeze(&mut self, pivot: usize) {
        let cap = self.costs[pivot];
        let members = self.slot_members(pivot);
        let groups = self.counts.len();
        let mut in_slot = vec![false; groups];
        for &m in &members {
            in_slot[m] = true;
        }
        let mut costs_now = Vec::with_capacity(groups);
        for receiver in cpython_set_order(&members) {
            if self.frozen[receiver] || receiver == pivot {
                continue;
            }
            loop {
                group_costs(self.sorted_lengths, &self.counts, &mut costs_now);
                let start: usize = self.counts[..receiver].iter().sum();
                let max_len = if self.counts[receiver] > 0 {
                    self.sorted_lengths[start]
                } else {
                    0
                };
                if cost(self.counts[receiver] + 1, max_len) > cap {
                    break;
                }
                let donors =
                    (0..groups).filter(|&i| !self.frozen[i] && !in_slot[i] && self.counts[i] > 1);
                let Some(donor) = first_min(donors, &costs_now) else {
                    break;
                };
                self.counts[receiver] += 1;
                self.counts[donor] -= 1;
            }
        }
        for m in members {
            self.frozen[m] = true;
        }
    }
}

/// Group sizes for `sorted_lengths` (longest first) cut into `groups` contiguous groups.
fn balance(
    sorted_lengths: &[i64],
    groups: usize,
    dp_size: usize,
    iterations: usize,
) -> Result<Vec<usize>, RebalanceError> {
    let n = sorted_lengths.len();
    if n < groups {
        return Err(RebalanceError::InvalidOption(format!(
            "not enough samples ({n}) to fill {groups} groups with at least one sample each"
        )));
    }
    let (base, extra) = (n / groups, n % groups);
    let counts = (0..groups).map(|i| base + usize::from(i < extra)).collect();
    let mut b = Balancer {
        sorted_lengths,
        dp_size,
        counts,
        frozen: vec![false; groups],
        costs: Vec::with_capacity(groups),
    };
    let mut seen: HashSet<Vec<usize>> = HashSet::new();
    let mut best_spread = f64::INFINITY;
    let mut best_counts = b.counts.clone();
    for _ in 0..iterations {
        if !seen.insert(b.counts.clone()) {
            break; // a cycle: no improving move is left
        }
        group_costs(sorted_lengths, &b.counts, &mut b.costs);
        let active = || (0..groups).filter(|&i| !b.frozen[i]);
        if active().take(2).count() <= 1 {
            break;
        }
        let Some(lo) = first_min(active(), &b.costs) else {
            break;
        };
        // Python's `max` keeps the first of equal maxima.
        let hi = active().fold(
            lo,
            |best, i| if b.costs[i] > b.costs[best] { i } else { best },
        );
        let hi = active().find(|&i| b.costs[i] == b.costs[hi]).unwrap_or(hi);
        let spread = b.costs[hi] - b.costs[lo];
        if spread < best_spread {
            best_spread = spread;
            best_counts.clone_from(&b.counts);
        }
        if b.costs[hi] == b.costs[lo] {
            break;
        }
        if b.counts[hi] > 1 {
            b.counts[hi] -= 1;
            b.counts[lo] += 1;
        } else {
            b.relieve_and_freeze(hi);
        }
    }
    Ok(best_counts)
}

/// One global batch dealt out: `ranks[rank][slot]` is a range of `sorted` (the batch's
/// indices, longest first).
struct Assignment {
    sorted: Vec<i64>,
    ranks: Vec<Vec<(usize, usize)>>,
}

impl Rebalance {
    pub fn groups(&self) -> usize {
        self.dp_size * self.grad_accum
    }

    fn validate(&self) -> Result<(), RebalanceError> {
        if self.dp_size < 1 || self.grad_accum < 1 {
            return Err(RebalanceError::InvalidOption(format!(
                "dp_size and grad_accum must be at least 1, not {} and {}",
                self.dp_size, self.grad_accum
            )));
        }
        let groups = self
            .dp_size
            .checked_mul(self.grad_accum)
            .ok_or(RebalanceError::Overflow)?;
        if self.effective_batch_size < groups {
            return Err(RebalanceError::InvalidOption(format!(
                "effective_batch_size ({}) must be at least dp_size * grad_accum ({groups})",
                self.effective_batch_size
            )));
        }
        Ok(())
    }

    /// Global batches per epoch of `n` samples (the trailing partial one when kept).
    pub fn global_batches(&self, n: usize) -> usize {
        let full = n / self.effective_batch_size;
        let has_tail = !self.drop_last && n % self.effective_batch_size > 0;
        full + usize::from(has_tail)
    }

    /// The micro-batches of every rank for one global batch (`batch` holds dataset indices).
    fn assign(&self, batch: &[i64], lengths: &[i64]) -> Result<Assignment, RebalanceError> {
        let mut pairs: Vec<(i64, i64)> = batch.iter().map(|&i| (i, lengths[i as usize])).collect();
        // Stable, longest first: equal lengths keep their order in the batch.
        pairs.sort_by_key(|p| std::cmp::Reverse(p.1));
        let sorted_lengths: Vec<i64> = pairs.iter().map(|p| p.1).collect();
        let groups = self.groups();
        let iterations = (groups * ITERATIONS_PER_GROUP).max(self.effective_batch_size);
        let counts = balance(&sorted_lengths, groups, self.dp_size, iterations)?;
        let mut costs = Vec::with_capacity(groups);
        group_costs(&sorted_lengths, &counts, &mut costs);
        let mut ranked: Vec<usize> = (0..groups).collect();
        ranked.sort_by(|&a, &b| costs[b].total_cmp(&costs[a]));
        let mut starts = Vec::with_capacity(groups);
        let mut start = 0;
        for &count in &counts {
            starts.push(start);
            start += count;
        }
        let mut ranks = vec![vec![(0, 0); self.grad_accum]; self.dp_size];
        for slot in 0..self.grad_accum {
            for (rank, slots) in ranks.iter_mut().enumerate() {
                let group = ranked[slot * self.dp_size + rank];
                slots[slot] = (starts[group], starts[group] + counts[group]);
            }
        }
        Ok(Assignment {
            sorted: pairs.into_iter().map(|p| p.0).collect(),
            ranks,
        })
    }

    /// One epoch's micro-batches for `rank` (or every rank, rank-major per global batch, when
    /// `rank` is None), from the epoch order `order` (a permutation of `0..lengths.len()`).
    pub fn epoch(
        &self,
        lengths: &[i64],
        order: &[i64],
        rank: Option<usize>,
    ) -> Result<Batches, RebalanceError> {
        self.validate()?;
        if let Some(rank) = rank {
            if rank >= self.dp_size {
                return Err(RebalanceError::InvalidOption(format!(
                    "rank {rank} is outside 0..{} (dp_size)",
                    self.dp_size
                )));
            }
        }
        if let Some((index, &length)) = lengths.iter().enumerate().find(|(_, &l)| l < 0) {
            return Err(RebalanceError::NegativeLength { index, length });
        }
        if order.len() != lengths.len() {
            return Err(RebalanceError::OrderSize {
                order: order.len(),
                lengths: lengths.len(),
            });
        }
        if let Some((position, &value)) = order
            .iter()
            .enumerate()
            .find(|(_, &v)| v < 0 || v as u64 >= lengths.len() as u64)
        {
            return Err(RebalanceError::OrderIndex {
                position,
                value,
                lengths: lengths.len(),
            });
        }
        let ebs = self.effective_batch_size;
        let groups = self.groups();
        let mut out = Batches::default();
        let batches = self.global_batches(order.len());
        let mut padded = Vec::new();
        for gb in 0..batches {
            let start = gb * ebs;
            let mut batch = &order[start..(start + ebs).min(order.len())];
            if batch.len() < groups {
                // The kept tail is too small for one sample per group: repeat the epoch order
                // from its start (cyclically), as torch's DistributedSampler pads.
                padded.clear();
                padded.extend_from_slice(batch);
                padded.extend(order.iter().cycle().take(groups - batch.len()));
                batch = &padded;
            }
            let Assignment { sorted, ranks } = self.assign(batch, lengths)?;
            let wanted = match rank {
                Some(r) => r..r + 1,
                None => 0..self.dp_size,
            };
            for slots in &ranks[wanted] {
                for &(a, b) in slots {
                    out.push(sorted[a..b].iter().copied());
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(ebs: usize, dp: usize, ga: usize, drop_last: bool) -> Rebalance {
        Rebalance {
            effective_batch_size: ebs,
            dp_size: dp,
            grad_accum: ga,
            drop_last,
        }
    }

    fn batches(m: &Batches) -> Vec<Vec<i64>> {
        m.iter().map(<[i64]>::to_vec).collect()
    }

    #[test]
    fn set_order_matches_cpython() {
        // Expected orders printed by CPython 3.11: list(set(values)).
        let cases: &[(&[usize], &[usize])] = &[
            (&[3, 1, 2], &[1, 2, 3]),
            (&[9, 3], &[9, 3]),
            (&[12, 3], &[3, 12]),
            (&[8, 0], &[8, 0]),
            (&[0, 8], &[0, 8]),
            (&[15, 7, 23], &[7, 23, 15]),
            (&[31, 30, 29, 28, 27, 26], &[26, 27, 28, 29, 30, 31]),
            (&[40, 33, 9, 1, 17, 25], &[33, 1, 40, 9, 17, 25]),
            (&[17, 1, 33, 9], &[17, 9, 1, 33]),
            (&[63, 31, 95, 127, 15], &[15, 127, 63, 95, 31]),
        ];
        for (values, expected) in cases {
            assert_eq!(&cpython_set_order(values), expected, "{values:?}");
        }
    }

    #[test]
    fn every_index_once_per_epoch_without_tail() {
        let lengths: Vec<i64> = (0..50).map(|i| (i * 37 % 23) + 1).collect();
        let order: Vec<i64> = (0..50).rev().collect();
        let p = plan(8, 2, 2, true);
        let all = p.epoch(&lengths, &order, None).unwrap();
        let mut seen: Vec<i64> = all.indices.clone();
        seen.sort();
        assert_eq!(seen, order[..48].iter().rev().copied().collect::<Vec<_>>());
        assert_eq!(batches(&all).len(), 6 * 4);
        assert!(batches(&all).iter().all(|b| !b.is_empty()));
        // Per rank: its two slots of each global batch.
        let r1 = batches(&p.epoch(&lengths, &order, Some(1)).unwrap());
        let every = batches(&all);
        let expected: Vec<Vec<i64>> = (0..6)
            .flat_map(|gb| every[gb * 4 + 2..gb * 4 + 4].to_vec())
            .collect();
        assert_eq!(r1, expected);
    }

    #[test]
    fn small_tail_is_padded_from_the_start_of_the_order() {
        let lengths = vec![5, 1, 4, 2, 3];
        let order = vec![4, 3, 2, 1, 0];
        let all = plan(4, 2, 2, false).epoch(&lengths, &order, None).unwrap();
        let b = batches(&all);
        assert_eq!(b.len(), 8);
        let tail: Vec<i64> = b[4..].concat();
        let mut tail_sorted = tail.clone();
        tail_sorted.sort();
        assert_eq!(tail_sorted, vec![0, 2, 3, 4]); // index 0 plus the first three of the order
    }

    #[test]
    fn longest_groups_are_smaller() {
        let mut lengths = vec![1000i64; 4];
        lengths.extend(vec![10; 60]);
        let order: Vec<i64> = (0..64).collect();
        let all = plan(64, 2, 1, true).epoch(&lengths, &order, None).unwrap();
        let b = batches(&all);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].len() + b[1].len(), 64);
    }

    #[test]
    fn bad_arguments_are_errors() {
        let p = plan(4, 2, 2, false);
        assert!(matches!(
            plan(3, 2, 2, false).epoch(&[1; 4], &[0, 1, 2, 3], None),
            Err(RebalanceError::InvalidOption(_))
        ));
        assert!(matches!(
            p.epoch(&[1; 4], &[0, 1, 2, 3], Some(2)),
            Err(RebalanceError::InvalidOption(_))
        ));
        assert_eq!(
            p.epoch(&[1, -1], &[0, 1], None),
            Err(RebalanceError::NegativeLength {
                index: 1,
                length: -1
            })
        );
        assert_eq!(
            p.epoch(&[1, 1], &[0], None),
            Err(RebalanceError::OrderSize {
                order: 1,
                lengths: 2
            })
        );
        assert_eq!(
            p.epoch(&[1, 1], &[0, 5], None),
            Err(RebalanceError::OrderIndex {
                position: 1,
                value: 5,
                lengths: 2
            })
        );
        assert_eq!(p.epoch(&[], &[], None).unwrap().indices, Vec::<i64>::new());
    }
}
