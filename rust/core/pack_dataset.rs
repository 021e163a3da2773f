//! TRL's `pack_dataset` decided from sequence lengths: which sequences (or pieces of them) go
//! into which packed row, in which order. The values themselves are moved by the caller (Arrow
//! `take`, or [`gather`] for fixed-width values).
//!
//! TRL packs each `map` batch on its own, so the plan takes the batches' row boundaries.
//! Within a batch, best-fit decreasing works as TRL's does: empty rows are dropped; rows longer
//! than `seq_length` are cut to it (`truncate`) or into `seq_length`-long pieces plus a shorter
//! last one (`split`); the pieces are ordered by length, longest first, ties in row order (a
//! stable sort); each goes into the open bin with the least room that still holds it — among
//! bins with equal room the one that reached that room first — or else into a new bin. Bins are
//! emitted in the order they were opened, each with its pieces in the order they were put in.

use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::mem::MaybeUninit;

use super::fresh_pages;
use super::sizes;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackDatasetError {
    /// A row's length is negative (Arrow offsets that go backwards).
    NegativeLength { row: usize, length: i64 },
    /// `seq_length` below 1.
    SeqLength(i64),
    /// Batch boundaries that do not run from 0 to the row count without going backwards.
    BatchBounds(String),
    /// More values (or pieces in one batch) than the plan can count.
    TooLarge { row: usize },
    /// A piece that does not lie inside the values it is taken from.
    OutOfBounds {
        start: i64,
        length: i64,
        values: usize,
    },
    /// The packed output (`bytes` long) could not be allocated.
    OutOfMemory { bytes: usize },
}

impl fmt::Display for PackDatasetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use PackDatasetError::*;
        match self {
            NegativeLength { row, length } => write!(
                f,
                "row {row} has length {length}; its list offsets go backwards"
            ),
            TooLarge { row } => write!(
                f,
                "the dataset is too large to pack: the count of values or pieces overflows at \
                 row {row}"
            ),
            SeqLength(value) => write!(f, "seq_length must be a positive int, got {value}"),
            BatchBounds(message) => write!(f, "bad batch boundaries: {message}"),
            OutOfBounds {
                start,
                length,
                values,
            } => write!(
                f,
                "values {start}..{} lie outside the {values} values given",
                start.saturating_add(*length)
            ),
            OutOfMemory { bytes } => {
                write!(f, "cannot allocate the {bytes} bytes of the packed values")
            }
        }
    }
}

impl std::error::Error for PackDatasetError {}

pub type Result<T> = std::result::Result<T, PackDatasetError>;

/// `count` values of `item` bytes checked by the one sizing rule (`core::sizes`) before they
/// are reserved: past this machine's memory (or the address space) is `OutOfMemory`.
fn within_memory(count: usize, item: usize) -> Result<()> {
    sizes::elements(&[count], item)
        .map(|_| ())
        .map_err(|err| PackDatasetError::OutOfMemory {
            bytes: match err {
                sizes::SizeError::OverMemory { bytes, .. } => bytes,
                sizes::SizeError::Unaddressable => usize::MAX,
            },
        })
}

/// What sequences longer than `seq_length` become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Cut to `seq_length`; the rest is dropped (TRL's `"bfd"`).
    Truncate,
    /// Cut into pieces of `seq_length` and a shorter last piece (TRL's `"bfd_split"`).
    Split,
}

/// The packed rows: pieces of the input's flattened values, in output order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedRows {
    /// Where each piece starts in the flattened values.
    pub starts: Vec<i64>,
    /// Each piece's length (TRL's `seq_lengths` values).
    pub lengths: Vec<i64>,
    /// Packed row `r` holds pieces `piece_offsets[r]..piece_offsets[r + 1]`.
    pub piece_offsets: Vec<i64>,
    /// Packed row `r` holds values `value_offsets[r]..value_offsets[r + 1]` of the output.
    pub value_offsets: Vec<i64>,
}

fn check_seq_length(seq_length: i64) -> Result<()> {
    if seq_length < 1 {
        return Err(PackDatasetError::SeqLength(seq_length));
    }
    Ok(())
}

/// Where each row starts in the flattened values, and the total (checked: lengths are
/// non-negative and their sum fits in i64).
fn row_starts(lengths: &[i64]) -> Result<Vec<i64>> {
    let mut starts = Vec::with_capacity(lengths.len() + 1);
    let mut total: i64 = 0;
    for (row, &length) in lengths.iter().enumerate() {
        if length < 0 {
            return Err(PackDatasetError::NegativeLength { row, length });
        }
        starts.push(total);
        total = total
            .checked_add(length)
            .ok_or(PackDatasetError::TooLarge { row })?;
    }
    starts.push(total);
    Ok(starts)
}

/// Checks that `bounds` runs from 0 to `rows` without going backwards.
fn check_bounds(bounds: &[i64], rows: usize) -> Result<()> {
    let bad = |message: String| Err(PackDatasetError::BatchBounds(message));
    match (bounds.first(), bounds.last()) {
        (Some(&0), Some(&last)) if usize::try_from(last).ok() == Some(rows) => {}
        _ => return bad(format!("they must run from 0 to {rows}, got {bounds:?}")),
    }
    if let Some(pair) = bounds.windows(2).find(|pair| pair[1] < pair[0]) {
        return bad(format!("{} comes after {}", pair[1], pair[0]));
    }
    Ok(())
}

/// Best-fit decreasing over each batch (`bounds[b]..bounds[b + 1]`) of rows of `lengths`.
pub fn best_fit_decreasing(
    lengths: &[i64],
    bounds: &[i64],
    seq_length: i64,
    overflow: Overflow,
) -> Result<PackedRows> {
    check_seq_length(seq_length)?;
    check_bounds(bounds, lengths.len())?;
    let starts = row_starts(lengths)?;
    let mut out = PackedRows {
        piece_offsets: vec![0],
        value_offsets: vec![0],
        ..PackedRows::default()
    };
    let mut pieces: Vec<(i64, i64)> = Vec::new();
    let mut order: Vec<u32> = Vec::new();
    for batch in bounds.windows(2) {
        // check_bounds made these valid indices into `lengths`.
        let (first, end) = (batch[0] as usize, batch[1] as usize);
        pieces.clear();
        for row in first..end {
            let (start, length) = (starts[row], lengths[row]);
            match overflow {
                Overflow::Truncate if length > 0 => pieces.push((start, length.min(seq_length))),
                Overflow::Truncate => {}
                Overflow::Split => {
                    let mut offset = 0;
                    while offset < length {
                        pieces.push((start + offset, (length - offset).min(seq_length)));
                        offset += seq_length;
                    }
                }
            }
            if pieces.len() >= u32::MAX as usize {
                return Err(PackDatasetError::TooLarge { row });
            }
        }
        order.clear();
        order.extend(0..pieces.len() as u32);
        // A stable sort: equal lengths keep row order, as Arrow's sort_indices does.
        order.sort_by_key(|&piece| Reverse(pieces[piece as usize].1));
        pack_batch(&pieces, &order, seq_length, &mut out);
    }
    Ok(out)
}

/// One batch's bins, appended to `out`.
fn pack_batch(pieces: &[(i64, i64)], order: &[u32], seq_length: i64, out: &mut PackedRows) {
    // Bins as (first piece, last piece, tokens) over a linked list of pieces, in opening order.
    let mut bins: Vec<(u32, u32, i64)> = Vec::new();
    let mut next = vec![u32::MAX; pieces.len()];
    // room -> bins with exactly that room, oldest first. Full bins (room 0) are never looked up.
    let mut by_room: BTreeMap<i64, VecDeque<u32>> = BTreeMap::new();
    for &piece in order {
        let length = pieces[piece as usize].1;
        let found = by_room
            .range_mut(length..)
            .next()
            .map(|(&room, queue)| (room, queue.pop_front(), queue.is_empty()));
        let bin = match found {
            Some((room, Some(bin), now_empty)) => {
                if now_empty {
                    by_room.remove(&room);
                }
                let entry = &mut bins[bin as usize];
                next[entry.1 as usize] = piece;
                entry.1 = piece;
                entry.2 += length;
                bin
            }
            _ => {
                bins.push((piece, piece, length));
                (bins.len() - 1) as u32
            }
        };
        let room = seq_length - bins[bin as usize].2;
        if room > 0 {
            by_room.entry(room).or_default().push_back(bin);
        }
    }
    for &(first, _, tokens) in &bins {
        let mut piece = first;
        while piece != u32::MAX {
            let (start, length) = pieces[piece as usize];
            out.starts.push(start);
            out.lengths.push(length);
            piece = next[piece as usize];
        }
        out.piece_offsets.push(out.starts.len() as i64);
        let last = out.value_offsets.last().copied().unwrap_or(0);
        out.value_offsets.push(last + tokens);
    }
}

/// The length of the piece a bin with `room` left takes next: the longest that fits, unless it
/// would leave a gap too small for any remaining piece — then the longest that leaves room for
/// the shortest piece, so that the bin can still be closed exactly.
fn next_piece(by_length: &BTreeMap<i64, VecDeque<i64>>, room: i64) -> Option<i64> {
    let longest = *by_length.range(..=room).next_back()?.0;
    let shortest = *by_length.first_key_value()?.0;
    let gap = room - longest;
    if gap == 0 || gap >= shortest {
        return Some(longest);
    }
    let leaving_room = by_length
        .range(..=room - shortest)
        .next_back()
        .map(|(&l, _)| l);
    Some(leaving_room.unwrap_or(longest))
}

/// `pack_dataset(..., whole_dataset=True)`: all rows packed as one batch, one bin at a time,
/// each filled with the longest remaining piece that fits (ties in row order) until none does —
/// except that a piece that would leave a gap no remaining piece fits is passed over for the
/// longest one that leaves room for the shortest. Not TRL's order: fuller rows, where
/// best-fit decreasing closes its early bins with the few short pieces and leaves every later
/// bin a few tokens short.
pub fn fullest_first(lengths: &[i64], seq_length: i64, overflow: Overflow) -> Result<PackedRows> {
    check_seq_length(seq_length)?;
    let starts = row_starts(lengths)?;
    // length -> the pieces of that length, in row order.
    let mut by_length: BTreeMap<i64, VecDeque<i64>> = BTreeMap::new();
    let mut count = 0usize;
    for (row, (&start, &length)) in starts.iter().zip(lengths).enumerate() {
        let mut offset = 0;
        while offset < length {
            let piece = (length - offset).min(seq_length);
            by_length
                .entry(piece)
                .or_default()
                .push_back(start + offset);
            count = count
                .checked_add(1)
                .ok_or(PackDatasetError::TooLarge { row })?;
            if overflow == Overflow::Truncate {
                break;
            }
            offset += seq_length;
        }
    }
    let mut out = PackedRows {
        starts: Vec::with_capacity(count),
        lengths: Vec::with_capacity(count),
        piece_offsets: vec![0],
        value_offsets: vec![0],
    };
    while !by_length.is_empty() {
        let mut room = seq_length;
        // Every piece is at most seq_length long, so each bin takes at least one.
        while let Some(length) = next_piece(&by_length, room) {
            let queue = by_length
                .get_mut(&length)
                .expect("next_piece returns a present length");
            if let Some(start) = queue.pop_front() {
                out.starts.push(start);
                out.lengths.push(length);
                room -= length;
            }
            if queue.is_empty() {
                by_length.remove(&length);
            }
        }
        out.piece_offsets.push(out.starts.len() as i64);
        let last = out.value_offsets.last().copied().unwrap_or(0);
        out.value_offsets.push(last + (seq_length - room));
    }
    Ok(out)
}

/// TRL's `"wrapped"`: each batch's values, concatenated and cut every `seq_length` values (the
/// last row of a batch may be shorter). Returns the output rows' offsets into the flattened
/// values.
///
/// The rows' lengths are summed batch by batch, not kept as a running sum per row: that would
/// be fresh memory (8 bytes a row) on every call, for a few cuts a batch. A first walk checks
/// the lengths, sums each batch and counts the output rows, so the offsets are allocated once,
/// and an impossible count is an error, not an abort.
pub fn wrapped(lengths: &[i64], bounds: &[i64], seq_length: i64) -> Result<Vec<i64>> {
    check_seq_length(seq_length)?;
    check_bounds(bounds, lengths.len())?;
    let batches = bounds.len().saturating_sub(1);
    let mut spans: Vec<i64> = Vec::new();
    if spans.try_reserve_exact(batches).is_err() {
        let bytes = batches.saturating_mul(std::mem::size_of::<i64>());
        return Err(PackDatasetError::OutOfMemory { bytes });
    }
    let mut total: i64 = 0;
    let mut rows: usize = 1;
    for batch in bounds.windows(2) {
        // check_bounds: 0 <= batch[0] <= batch[1] <= lengths.len().
        let (start, end) = (batch[0] as usize, batch[1] as usize);
        let span = match batch_sum(&lengths[start..end]) {
            Some(span) => total.checked_add(span).map(|_| span),
            None => None,
        };
        let span = match span {
            Some(span) => span,
            None => checked_batch_sum(lengths, start, end, total)?,
        };
        total += span; // checked above
        let cuts = span / seq_length + i64::from(span % seq_length != 0);
        let cuts = usize::try_from(cuts).ok();
        rows = cuts
            .and_then(|cuts| rows.checked_add(cuts))
            .ok_or(PackDatasetError::TooLarge { row: end })?;
        spans.push(span);
    }
    let mut offsets = Vec::new();
    let bytes = rows.saturating_mul(std::mem::size_of::<i64>());
    within_memory(rows, std::mem::size_of::<i64>())?;
    if offsets.try_reserve_exact(rows).is_err() {
        return Err(PackDatasetError::OutOfMemory { bytes });
    }
    offsets.push(0);
    let mut end: i64 = 0;
    for span in spans {
        let first = end;
        end += span;
        let mut offset = first;
        while end - offset > seq_length {
            offset += seq_length;
            offsets.push(offset);
        }
        if end > first {
            offsets.push(end);
        }
    }
    Ok(offsets)
}

/// A batch's lengths summed in one branch-free walk (the compiler vectorises it), where that
/// cannot overflow: fewer than 2^31 lengths, each in `0..2^32`. None otherwise (a negative or
/// huge length, for `checked_batch_sum` to name).
fn batch_sum(lengths: &[i64]) -> Option<i64> {
    if lengths.len() >= 1 << 31 {
        return None;
    }
    let (mut bits, mut sum) = (0u64, 0i64);
    for &length in lengths {
        bits |= length as u64;
        sum = sum.wrapping_add(length);
    }
    (bits >> 32 == 0).then_some(sum)
}

/// The lengths of rows `start..end` summed row by row onto `total`, naming the first negative
/// length or the row where the running total overflows; returns the batch's sum.
fn checked_batch_sum(lengths: &[i64], start: usize, end: usize, total: i64) -> Result<i64> {
    let mut sum = total;
    for (row, &length) in lengths.iter().enumerate().take(end).skip(start) {
        if length < 0 {
            return Err(PackDatasetError::NegativeLength { row, length });
        }
        sum = sum
            .checked_add(length)
            .ok_or(PackDatasetError::TooLarge { row })?;
    }
    Ok(sum - total)
}

/// The flattened-value indices of the pieces, in order (for an Arrow `take`).
pub fn take_indices(starts: &[i64], lengths: &[i64]) -> Vec<i64> {
    let total: i64 = lengths.iter().map(|&length| length.max(0)).sum();
    let mut indices = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for (&start, &length) in starts.iter().zip(lengths) {
        indices.extend(start..start + length.max(0));
    }
    indices
}

/// Copies the pieces out of fixed-width values (`width` bytes each), in order.
pub fn gather(values: &[u8], width: usize, starts: &[i64], lengths: &[i64]) -> Result<Vec<u8>> {
    gather_chunks(&[values], width, starts, lengths)
}

/// Copies the pieces out of fixed-width values held in consecutive chunks (the flattened
/// values are the chunks one after another; `width` bytes a value), in order, into one buffer
/// allocated once. A piece must lie inside one chunk (pieces are parts of rows, and a row
/// lies in one chunk), so the values are never concatenated first.
pub fn gather_chunks(
    chunks: &[&[u8]],
    width: usize,
    starts: &[i64],
    lengths: &[i64],
) -> Result<Vec<u8>> {
    let width = width.max(1);
    // Where each chunk starts, in values; the last entry is the total.
    let mut chunk_starts = Vec::with_capacity(chunks.len() + 1);
    let mut count = 0usize;
    for chunk in chunks {
        chunk_starts.push(count);
        count += chunk.len() / width; // the chunks are in memory: their sum fits in usize
    }
    chunk_starts.push(count);
    // Each piece as (chunk, byte offset in it, byte length), checked before anything is copied.
    let mut places = Vec::with_capacity(starts.len());
    let mut total = 0usize;
    for (&start, &length) in starts.iter().zip(lengths) {
        let out_of_bounds = PackDatasetError::OutOfBounds {
            start,
            length,
            values: count,
        };
        let (Ok(first), Ok(len)) = (usize::try_from(start), usize::try_from(length)) else {
            return Err(out_of_bounds);
        };
        // The last chunk starting at or before `first` (empty chunks are passed over).
        let chunk = chunk_starts[..chunks.len()]
            .partition_point(|&chunk_start| chunk_start <= first)
            .saturating_sub(1);
        let inside = first
            .checked_add(len)
            .is_some_and(|end| chunks.len() > chunk && end <= chunk_starts[chunk + 1]);
        if !inside {
            return Err(out_of_bounds);
        }
        // Inside a chunk in memory: these byte counts fit in usize.
        places.push((chunk, (first - chunk_starts[chunk]) * width, len * width));
        // Pieces may repeat values, so their sum is checked.
        total = total
            .checked_add(len * width)
            .ok_or(PackDatasetError::OutOfMemory { bytes: usize::MAX })?;
    }
    // Allocated once and not zeroed: the pieces cover it exactly, each byte written once.
    // Checked by the one sizing rule first: pieces that repeat values can ask for more than
    // the machine has.
    within_memory(total, 1)?;
    let mut out: Vec<u8> = Vec::new();
    if out.try_reserve_exact(total).is_err() {
        return Err(PackDatasetError::OutOfMemory { bytes: total });
    }
    let spare = &mut out.spare_capacity_mut()[..total];
    // The copy maps the output's fresh pages, which on a virtual machine costs more than the
    // copy itself: 4 KiB pages (much faster there than huge ones, `fresh_pages`), and a large
    // output written by several threads, each its own run of pieces.
    fresh_pages::prefer_small_pages(spare);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let parts = if total < PARALLEL_GATHER_BYTES {
        1
    } else {
        threads.min(MAX_GATHER_THREADS)
    };
    let copy = |output: &mut [MaybeUninit<u8>], places: &[(usize, usize, usize)]| {
        let mut at = 0;
        for &(chunk, offset, len) in places {
            let source = &chunks[chunk][offset..offset + len];
            for (to, &from) in output[at..at + len].iter_mut().zip(source) {
                to.write(from);
            }
            at += len;
        }
    };
    if parts < 2 {
        copy(spare, &places);
    } else {
        std::thread::scope(|scope| {
            let (mut rest, mut remaining) = (spare, &places[..]);
            for part in (1..=parts).rev() {
                // This thread's pieces: about a `part`-th of the bytes still to copy.
                let (mut count, mut bytes) = (0, 0);
                let share = rest.len() / part;
                while count < remaining.len() && (part == 1 || bytes < share) {
                    bytes += remaining[count].2;
                    count += 1;
                }
                let (output, after) = std::mem::take(&mut rest).split_at_mut(bytes);
                let (mine, others) = remaining.split_at(count);
                (rest, remaining) = (after, others);
                scope.spawn(move || copy(output, mine));
            }
        });
    }
    // SAFETY: `places` runs over the output in order without gaps (each piece starts where
    // the one before it ended, the first at 0) and its lengths sum to `total`, so `copy` wrote
    // every byte of `out[..total]`; the threads have all finished (the scope joins them).
    unsafe { out.set_len(total) };
    Ok(out)
}

/// Outputs below this many bytes are gathered on the calling thread.
const PARALLEL_GATHER_BYTES: usize = 32 << 20;
/// The most threads one gather uses.
const MAX_GATHER_THREADS: usize = 8;

#[cfg(test)]
mod tests {
    #[test]
    fn fullest_first_closes_every_bin_it_can() {
        let lengths = [6, 5, 4, 4, 1, 0, 3];
        let out = fullest_first(&lengths, 10, Overflow::Truncate).unwrap();
        assert_eq!(out.lengths, vec![6, 4, 5, 4, 1, 3]);
        assert_eq!(out.starts, vec![0, 11, 6, 15, 19, 20]);
        assert_eq!(out.piece_offsets, vec![0, 2, 5, 6]);
        assert_eq!(out.value_offsets, vec![0, 10, 20, 23]);
    }

    #[test]
    fn fullest_first_truncates_or_splits_long_rows() {
        let truncated = fullest_first(&[7, 2], 4, Overflow::Truncate).unwrap();
        assert_eq!(truncated.lengths, vec![4, 2]);
        assert_eq!(truncated.piece_offsets, vec![0, 1, 2]);
        let split = fullest_first(&[7, 2], 4, Overflow::Split).unwrap();
        // The 3 would leave a gap the 2 cannot fill: the 2 goes first, the 3 gets its own row.
        assert_eq!(split.lengths, vec![4, 2, 3]);
        assert_eq!(split.starts, vec![0, 7, 4]);
        assert_eq!(split.piece_offsets, vec![0, 1, 2, 3]);
        assert!(fullest_first(&[1], 0, Overflow::Split).is_err());
        assert!(fullest_first(&[-1], 4, Overflow::Split).is_err());
        assert_eq!(
            fullest_first(&[], 4, Overflow::Split)
                .unwrap()
                .piece_offsets,
            vec![0]
        );
    }

    use super::*;

    fn rows(plan: &PackedRows) -> Vec<Vec<(i64, i64)>> {
        plan.piece_offsets
            .windows(2)
            .map(|w| {
                (w[0] as usize..w[1] as usize)
                    .map(|p| (plan.starts[p], plan.lengths[p]))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn trl_docstring_example_truncate() {
        // [[1,2,3,4,5],[6,7],[8,9,10],[11]], seq_length 4 -> [[1..4]], [[8,9,10],[11]], [[6,7]]
        let lengths = [5, 2, 3, 1];
        let plan = best_fit_decreasing(&lengths, &[0, 4], 4, Overflow::Truncate).unwrap();
        assert_eq!(
            rows(&plan),
            vec![vec![(0, 4)], vec![(7, 3), (10, 1)], vec![(5, 2)]]
        );
        assert_eq!(plan.value_offsets, vec![0, 4, 8, 10]);
    }

    #[test]
    fn trl_docstring_example_split() {
        // -> [[1,2,3,4]], [[8,9,10],[5]], [[6,7],[11]]
        let plan = best_fit_decreasing(&[5, 2, 3, 1], &[0, 4], 4, Overflow::Split).unwrap();
        assert_eq!(
            rows(&plan),
            vec![vec![(0, 4)], vec![(7, 3), (4, 1)], vec![(5, 2), (10, 1)]]
        );
    }

    #[test]
    fn equal_room_goes_to_the_oldest_bin_and_ties_keep_row_order() {
        // Two bins left with room 2 each; the next piece of 2 goes to the first opened.
        let plan = best_fit_decreasing(&[3, 3, 2], &[0, 3], 5, Overflow::Truncate).unwrap();
        assert_eq!(rows(&plan), vec![vec![(0, 3), (6, 2)], vec![(3, 3)]]);
    }

    #[test]
    fn best_fit_takes_the_least_room_that_fits() {
        // Rooms 4 (after 6) and 2 (after 8); a piece of 2 goes to the bin with room 2.
        let plan = best_fit_decreasing(&[6, 8, 2], &[0, 3], 10, Overflow::Truncate).unwrap();
        assert_eq!(rows(&plan), vec![vec![(6, 8), (14, 2)], vec![(0, 6)]]);
    }

    #[test]
    fn batches_are_packed_apart_and_empty_rows_dropped() {
        let plan =
            best_fit_decreasing(&[1, 0, 1, 0, 0], &[0, 1, 3, 4, 5], 4, Overflow::Truncate).unwrap();
        assert_eq!(rows(&plan), vec![vec![(0, 1)], vec![(1, 1)]]);
        let plan = best_fit_decreasing(&[], &[0], 4, Overflow::Split).unwrap();
        assert_eq!(plan.piece_offsets, vec![0]);
    }

    #[test]
    fn wrapped_cuts_each_batch() {
        assert_eq!(
            wrapped(&[3, 2, 5, 1], &[0, 2, 4], 2).unwrap(),
            vec![0, 2, 4, 5, 7, 9, 11]
        );
        assert_eq!(wrapped(&[2, 2], &[0, 2], 2).unwrap(), vec![0, 2, 4]);
        assert_eq!(wrapped(&[0, 0], &[0, 1, 2], 2).unwrap(), vec![0]);
        // Lengths up to 2^32 - 1 take the fast sum; one at 2^32 the checked one: same cuts.
        let big = (1_i64 << 32) - 1;
        assert_eq!(
            wrapped(&[big, 1], &[0, 2], big).unwrap(),
            wrapped(&[1, big], &[0, 2], big).unwrap()
        );
        assert_eq!(
            wrapped(&[big + 1], &[0, 1], 1 << 31).unwrap(),
            vec![0, 1 << 31, 1 << 32]
        );
        // Empty batches between others, a batch cut exactly at seq_length.
        assert_eq!(
            wrapped(&[4, 0, 0, 3, 1], &[0, 1, 2, 3, 5], 2).unwrap(),
            vec![0, 2, 4, 6, 8]
        );
    }

    #[test]
    fn wrapped_rejects_bad_lengths() {
        assert!(matches!(
            wrapped(&[1, -1], &[0, 2], 4),
            Err(PackDatasetError::NegativeLength { row: 1, length: -1 })
        ));
        assert_eq!(
            wrapped(&[i64::MAX, 1], &[0, 1, 2], 4),
            Err(PackDatasetError::TooLarge { row: 1 })
        );
        // The first bad row is named, in a batch the fast sum leaves to the checked one.
        assert_eq!(
            wrapped(&[1, 1 << 40, -3, 2], &[0, 4], 4),
            Err(PackDatasetError::NegativeLength { row: 2, length: -3 })
        );
        assert_eq!(
            wrapped(&[1 << 40, i64::MAX - (1 << 40)], &[0, 2], 1 << 62),
            Ok(vec![0, 1 << 62, i64::MAX])
        );
        // More output rows than memory holds: an error before anything is written.
        assert!(matches!(
            wrapped(&[i64::MAX], &[0, 1], 1),
            Err(PackDatasetError::OutOfMemory { .. } | PackDatasetError::TooLarge { .. })
        ));
    }

    #[test]
    fn bad_input_is_an_error() {
        assert_eq!(
            best_fit_decreasing(&[1], &[0, 1], 0, Overflow::Truncate),
            Err(PackDatasetError::SeqLength(0))
        );
        assert!(matches!(
            best_fit_decreasing(&[1, -1], &[0, 2], 4, Overflow::Split),
            Err(PackDatasetError::NegativeLength { row: 1, .. })
        ));
        for bounds in [&[][..], &[1, 2], &[0, 1], &[0, 2, 1, 2]] {
            assert!(matches!(
                wrapped(&[1, 1], bounds, 4),
                Err(PackDatasetError::BatchBounds(_))
            ));
        }
        assert!(matches!(
            best_fit_decreasing(&[i64::MAX, 1], &[0, 2], 4, Overflow::Truncate),
            Err(PackDatasetError::TooLarge { row: 1 })
        ));
        assert!(gather(&[0; 8], 4, &[1], &[2]).is_err());
        assert!(gather(&[0; 8], 4, &[-1], &[1]).is_err());
    }

    #[test]
    fn gather_and_take_indices_follow_the_pieces() {
        let values: Vec<u8> = (0..12).collect();
        assert_eq!(
            gather(&values, 2, &[4, 0], &[1, 2]).unwrap(),
            vec![8, 9, 0, 1, 2, 3]
        );
        assert_eq!(take_indices(&[4, 0], &[1, 2]), vec![4, 0, 1]);
    }

    #[test]
    fn every_piece_is_placed_once_and_no_bin_overflows() {
        let lengths: Vec<i64> = (0..500).map(|i| (i * 7919 % 97) as i64).collect();
        for overflow in [Overflow::Truncate, Overflow::Split] {
            let plan = best_fit_decreasing(&lengths, &[0, 123, 400, 500], 50, overflow).unwrap();
            for w in plan.value_offsets.windows(2) {
                assert!(w[1] - w[0] <= 50 && w[1] > w[0]);
            }
            let mut placed = take_indices(&plan.starts, &plan.lengths);
            placed.sort();
            if overflow == Overflow::Split {
                let total: i64 = lengths.iter().sum();
                assert_eq!(placed, (0..total).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn gather_chunks_reads_each_piece_from_its_chunk() {
        let chunks: [&[u8]; 4] = [&[0, 0, 1, 0], &[], &[2, 0, 3, 0, 4, 0], &[5, 0]];
        let out = gather_chunks(&chunks, 2, &[5, 2, 0, 4], &[1, 2, 1, 1]).unwrap();
        assert_eq!(out, vec![5, 0, 2, 0, 3, 0, 0, 0, 4, 0]);
        assert_eq!(
            gather_chunks(&chunks, 2, &[5], &[0]).unwrap(),
            Vec::<u8>::new()
        );
        // A piece across two chunks, past the end, or negative is an error, not a panic.
        for (start, length) in [(1, 2), (4, 2), (6, 1), (-1, 1), (0, -1), (i64::MAX, 1)] {
            assert!(matches!(
                gather_chunks(&chunks, 2, &[start], &[length]),
                Err(PackDatasetError::OutOfBounds { .. })
            ));
        }
        assert!(gather_chunks(&[], 4, &[0], &[1]).is_err());
        // Past the threshold the copy is split between threads; the bytes are the same.
        let big: Vec<u8> = (0..PARALLEL_GATHER_BYTES + 1000).map(|i| i as u8).collect();
        let (left, right) = big.split_at(big.len() / 3);
        let starts: Vec<i64> = (0..big.len() as i64 / 1000)
            .rev()
            .map(|p| p * 1000)
            .collect();
        let lengths: Vec<i64> = starts
            .iter()
            .map(|&s| {
                if (s as usize) < left.len() {
                    (left.len() as i64 - s).min(1000)
                } else {
                    1000
                }
            })
            .collect();
        let out = gather_chunks(&[left, right], 1, &starts, &lengths).unwrap();
        let expected: Vec<u8> = starts
            .iter()
            .zip(&lengths)
            .flat_map(|(&s, &l)| big[s as usize..(s + l) as usize].iter().copied())
            .collect();
        assert_eq!(out, expected);
        assert_eq!(gather_chunks(&[], 4, &[], &[]).unwrap(), Vec::<u8>::new());
    }
}
