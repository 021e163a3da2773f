//! Binding for the batch samplers' core (`rebalance`, `packing`): copies the numpy lengths in
//! (`OwnedArray1`), computes an epoch with the interpreter released, and hands back (indices, offsets) arrays.

use pyo3::prelude::*;

use crate::core::packing::{self, Packing};
use crate::core::rebalance::Rebalance;
use crate::py::convert::array_values::OwnedArray1;
use crate::py::output::numpy_arrays::{batch_arrays, I64Array};

type BatchArrays<'py> = (I64Array<'py>, I64Array<'py>);

/// transformers' `BatchRebalanceSampler` epoch for the epoch order `order` (its
/// `torch.randperm`): `rank`'s micro-batches, or every rank's (rank-major per global batch)
/// when `rank` is None.
#[pyfunction]
#[pyo3(signature = (lengths, order, effective_batch_size, dp_size, grad_accum, drop_last, rank=None))]
#[allow(clippy::too_many_arguments)]
pub fn rebalance_epoch<'py>(
    py: Python<'py>,
    lengths: OwnedArray1<i64>,
    order: OwnedArray1<i64>,
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
    let (lengths, order) = (lengths.0, order.0);
    let batches = py.detach(|| plan.epoch(&lengths, &order, rank))?;
    batch_arrays(py, batches)
}

/// One epoch of token-budget batches (see `core::packing`), `rank`'s share of them.
#[pyfunction]
#[pyo3(signature = (lengths, max_tokens, *, window, shuffle, seed, epoch, truncate, num_replicas, rank, drop_last))]
#[allow(clippy::too_many_arguments)]
pub fn pack_epoch<'py>(
    py: Python<'py>,
    lengths: OwnedArray1<i64>,
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
    let lengths = lengths.0;
    let batches = py.detach(|| {
        let all = plan.epoch(&lengths)?;
        packing::shard(&all, num_replicas, rank, drop_last)
    })?;
    batch_arrays(py, batches)
}
