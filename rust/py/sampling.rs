//! Binding for the batch samplers' core (`rebalance`, `packing`): borrows the numpy lengths,
//! computes an epoch with the interpreter released, and hands back (indices, offsets) arrays.

use std::borrow::Cow;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::core::batches::Batches;
use crate::core::packing::{self, Packing};
use crate::core::rebalance::Rebalance;

type BatchArrays<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>);

fn borrowed<'a>(array: &'a PyReadonlyArray1<'_, i64>) -> Cow<'a, [i64]> {
    // Contiguous arrays (the usual case) are borrowed; strided views are copied once.
    match array.as_slice() {
        Ok(slice) => Cow::Borrowed(slice),
        Err(_) => Cow::Owned(array.as_array().to_vec()),
    }
}

fn to_arrays(py: Python<'_>, batches: Batches) -> BatchArrays<'_> {
    (
        PyArray1::from_vec(py, batches.indices),
        PyArray1::from_vec(py, batches.offsets),
    )
}

/// transformers' `BatchRebalanceSampler` epoch for the epoch order `order` (its
/// `torch.randperm`): `rank`'s micro-batches, or every rank's (rank-major per global batch)
/// when `rank` is None.
#[pyfunction]
#[pyo3(signature = (lengths, order, effective_batch_size, dp_size, grad_accum, drop_last, rank=None))]
#[allow(clippy::too_many_arguments)]
pub fn rebalance_epoch<'py>(
    py: Python<'py>,
    lengths: PyReadonlyArray1<'py, i64>,
    order: PyReadonlyArray1<'py, i64>,
    effective_batch_size: usize,
    dp_size: usize,
    grad_accum: usize,
    drop_last: bool,
    rank: Option<usize>,
) -> PyResult<BatchArrays<'py>> {
    let plan = Rebalance {
        effective_batch_size,
        dp_size,
        grad_accum,
        drop_last,
    };
    let (lengths, order) = (borrowed(&lengths), borrowed(&order));
    let batches = py.detach(|| plan.epoch(&lengths, &order, rank))?;
    Ok(to_arrays(py, batches))
}

/// One epoch of token-budget batches (see `core::packing`), `rank`'s share of them.
#[pyfunction]
#[pyo3(signature = (lengths, max_tokens, *, window, shuffle, seed, epoch, truncate, num_replicas, rank, drop_last))]
#[allow(clippy::too_many_arguments)]
pub fn pack_epoch<'py>(
    py: Python<'py>,
    lengths: PyReadonlyArray1<'py, i64>,
    max_tokens: i64,
    window: usize,
    shuffle: bool,
    seed: u64,
    epoch: u64,
    truncate: bool,
    num_replicas: usize,
    rank: usize,
    drop_last: bool,
) -> PyResult<BatchArrays<'py>> {
    let plan = Packing {
        max_tokens,
        window,
        shuffle,
        seed,
        epoch,
        truncate,
    };
    let lengths = borrowed(&lengths);
    let batches = py.detach(|| {
        let all = plan.epoch(&lengths)?;
        packing::shard(&all, num_replicas, rank, drop_last)
    })?;
    Ok(to_arrays(py, batches))
}
