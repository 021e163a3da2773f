"""Ray Data's `iter_torch_batches(collate_fn=...)` with a fastcollate collator: `RayCollateFn`.

Ray decides what a `collate_fn` is given by its class: a subclass of Ray's
`ArrowBatchCollateFn` gets each batch as a `pyarrow.Table`, a plain function gets a dict of
numpy arrays (object arrays for list columns, and a deprecation warning since Ray 2.47).
`RayCollateFn` is an `ArrowBatchCollateFn`, so the batch arrives as Arrow and goes through
`collate_arrow`: fastcollate's collators pad it straight from the Arrow buffers.
"""

from __future__ import annotations

from typing import Any

from ray.data.collate_fn import ArrowBatchCollateFn

from ..arrow import collate_arrow


class RayCollateFn(ArrowBatchCollateFn):
    """A `collate_fn` for Ray Data's ``iter_torch_batches``: each batch (a `pyarrow.Table`) goes
    through ``collate_arrow(batch, collator, columns)``.

    The output is what ``collator(batch.to_pylist())`` gives: with fastcollate's
    `DataCollatorWithPadding`, what transformers' `DataCollatorWithPadding` gives for those
    rows (keys, values, shapes, dtypes). `columns` keeps only those columns, in that order
    (leave out text columns the model does not take).

    Ray calls the collate_fn from its prefetch threads, several at once when
    ``prefetch_batches > 1``: the collator must allow that. fastcollate's
    `DataCollatorWithPadding` keeps nothing between calls (its batches are the same as one
    thread's); a collator that draws random numbers (masked language modelling) draws them in
    whatever order the threads come.

    Ray moves a returned dict of CPU tensors to the device `iter_torch_batches` is given
    (the worker's device under Ray Train).
    """

    def __init__(self, collator: Any, columns: list[str] | None = None):
        if not callable(collator):
            raise TypeError(
                f"RayCollateFn takes a collator (a callable), not a {type(collator).__name__}"
            )
        self.collator = collator
        self.columns = None if columns is None else list(columns)

    def __call__(self, batch: Any) -> Any:
        return collate_arrow(batch, self.collator, self.columns)

    def __repr__(self) -> str:
        return f"RayCollateFn({self.collator!r}, columns={self.columns!r})"
