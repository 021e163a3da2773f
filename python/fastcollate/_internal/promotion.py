"""The dtype `default_data_collator` gives a key: what transformers' own construction of it
(`torch.tensor(rows)`, `torch.stack(rows)`, `np.array(rows)` or `np.stack(rows)`) infers from
the values of *every* row, so that fastcollate can produce exactly that dtype, losslessly.

Each row contributes the dtypes of its leaves: a Python bool / int / float is bool / int64 /
the default float (float32 for torch, float64 for numpy), a numpy array or scalar and a torch
tensor their own dtype; the leaves' dtypes are then promoted as torch or numpy promotes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import numpy as np

from .tensors import is_torch_tensor, torch_module

# A value the promotion cannot describe (str, object, None inside a sequence, ...): the
# caller leaves the key to the native module, which reports it with its row.
UNKNOWN = object()

# A Python int's numpy dtype depends on its value (int64, or uint64 above int64): it stands
# as `PYTHON_INT` among the leaves until `_resolved` looks at the values.
PYTHON_INT = "python int"
_NUMPY_PYTHON_LEAVES = {bool: np.dtype(bool), int: PYTHON_INT, float: np.dtype(np.float64)}
_INT64_MAX = 2**63 - 1
_UINT64 = np.dtype(np.uint64)


def _python_ints(value: Any) -> Iterable[int]:
    """The Python ints among a value's leaves (lists and tuples looked into)."""
    if type(value) is int:
        yield value
    elif type(value) in (list, tuple):
        for item in value:
            yield from _python_ints(item)


def _resolved(leaves: set[Any], values: Iterable[Any], always: bool = False) -> set[Any]:
    """`leaves` with `PYTHON_INT` replaced by what numpy discovers for the Python ints among
    `values`: int64, and uint64 for one above int64. The values are looked at only beside a
    uint64 leaf, the one dtype with which a Python int above int64 promotes to something else
    than what the native reader reports (an integer that does not fit), or `always`."""
    if PYTHON_INT not in leaves:
        return leaves
    leaves = leaves - {PYTHON_INT}
    if _UINT64 not in leaves and not always:
        return leaves | {np.dtype(np.int64)}
    for value in values:
        for number in _python_ints(value):
            leaves.add(np.dtype(np.int64) if number <= _INT64_MAX else _UINT64)
    return leaves


def _numpy_leaves(value: Any, out: set[Any]) -> bool:
    """Adds the numpy dtypes `np.array` discovers in `value` to `out`; False: unknown leaves."""
    kind = type(value)
    if kind in _NUMPY_PYTHON_LEAVES:
        out.add(_NUMPY_PYTHON_LEAVES[kind])
        return True
    if isinstance(value, (np.ndarray, np.generic)):
        out.add(value.dtype)
        return True
    if is_torch_tensor(value):
        out.add(_numpy_dtype_of_torch(value.dtype))
        return True
    if kind in (list, tuple):
        types = set(map(type, value))
        if types <= {int, bool, float}:
            out.update(_NUMPY_PYTHON_LEAVES[t] for t in types)
            return True
        return all(_numpy_leaves(item, out) for item in value)
    return False


def _torch_leaves(value: Any, out: set[Any], torch: Any) -> bool:
    """Adds the torch dtypes `torch.tensor` infers from `value` to `out`."""
    kind = type(value)
    if kind is bool:
        out.add(torch.bool)
    elif kind is int:
        out.add(torch.int64)
    elif kind is float:
        out.add(torch.get_default_dtype())
    elif isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.kind not in "biuf":
            return False
        out.add(torch.from_numpy(np.empty(0, value.dtype)).dtype)
    elif is_torch_tensor(value):
        out.add(value.dtype)
    elif kind in (list, tuple):
        types = set(map(type, value))
        if types <= {int, bool, float}:
            return all(_torch_leaves(t(), out, torch) for t in types)
        return all(_torch_leaves(item, out, torch) for item in value)
    else:
        return False
    return True


def _numpy_dtype_of_torch(dtype: Any) -> np.dtype:
    return cast(np.dtype, torch_module().empty(0, dtype=dtype).numpy().dtype)


def _row_dtype_numpy(value: Any) -> Any:
    """`np.asarray(value).dtype` without building the array (what np.stack promotes)."""
    if isinstance(value, np.ndarray):
        return value.dtype
    if is_torch_tensor(value):
        return _numpy_dtype_of_torch(value.dtype)
    leaves: set[Any] = set()
    if not _numpy_leaves(value, leaves):
        return UNKNOWN
    # One row's own dtype (promoted with the others' by np.stack): its ints looked at.
    leaves = _resolved(leaves, [value], always=True)
    # An empty sequence is float64 in numpy.
    return np.result_type(*leaves) if leaves else np.dtype(np.float64)


def stacked_dtype(values: Iterable[Any], return_tensors: str, first: Any) -> Any:
    """The dtype transformers' `default_data_collator` gives a key whose rows hold `values`
    (`first` is row 0's value, which picks the construction): a numpy dtype for "np", a torch
    dtype for "pt", or UNKNOWN."""
    if return_tensors == "pt" and is_torch_tensor(first):
        torch = torch_module()
        row_dtypes = []
        for value in values:
            if not is_torch_tensor(value):
                return UNKNOWN
            row_dtypes.append(value.dtype)
        # `torch.stack` promotes row by row, in row order: so does this, and where torch
        # refuses a pair (uint16/32/64 beside a signed int, ...) so does `torch.stack`.
        result = _promote_torch(row_dtypes, torch)
        if result is UNKNOWN:
            raise StackPromotionError(
                "torch.stack cannot promote the rows' dtypes "
                f"({', '.join(str(d) for d in dict.fromkeys(row_dtypes))}) to one dtype"
            )
        return result
    if isinstance(first, np.ndarray):
        dtypes = {_row_dtype_numpy(value) for value in values}
        if UNKNOWN in dtypes:
            return UNKNOWN
        dtype = np.result_type(*dtypes)
        if return_tensors == "pt":
            if dtype.kind not in "biuf":
                return UNKNOWN
            return torch_module().from_numpy(np.empty(0, dtype)).dtype
        return dtype
    scalars, others = _python_leaves(values)
    if return_tensors == "pt":
        torch = torch_module()
        dtypes = set()
        for value in [*(t() for t in scalars), *others]:
            if not _torch_leaves(value, dtypes, torch):
                return UNKNOWN
        return _promote_torch(dtypes, torch) if dtypes else torch.get_default_dtype()
    dtypes = set()
    for value in [*(t() for t in scalars), *others]:
        if not _numpy_leaves(value, dtypes):
            return UNKNOWN
    dtypes = _resolved(dtypes, values)
    return np.result_type(*dtypes) if dtypes else np.dtype(np.float64)


_SCALARS = frozenset((int, bool, float))


def _python_leaves(values: Iterable[Any]) -> tuple[set[Any], list[Any]]:
    """The Python scalar types among the leaves of flat list/tuple rows and scalar rows,
    gathered with one C-level pass per row, and every value that needs a closer look."""
    scalars: set[Any] = set()
    others = []
    for value in values:
        kind = type(value)
        if kind is list or kind is tuple:
            types = set(map(type, value))
            if types <= _SCALARS:
                scalars |= types
                continue
        elif kind in _SCALARS:
            scalars.add(kind)
            continue
        others.append(value)
    return scalars, others


class StackPromotionError(RuntimeError):
    """The rows' dtypes are ones `torch.stack` refuses to promote to one (it raises a
    RuntimeError too)."""


def _promote_torch(dtypes: Iterable[Any], torch: Any) -> Any:
    """`dtypes` promoted pairwise, left to right, as torch's result type folds a list of
    tensors (`torch.promote_types` is not associative once uint16/32/64 are involved, and
    refuses some pairs: UNKNOWN then). A set is taken in a fixed order (by name), not in its
    iteration order, which follows the dtype objects' addresses."""
    if isinstance(dtypes, (set, frozenset)):
        dtypes = sorted(dtypes, key=str)
    result = None
    for dtype in dtypes:
        if dtype is result:
            continue
        try:
            result = dtype if result is None else torch.promote_types(result, dtype)
        except (RuntimeError, TypeError):
            return UNKNOWN
    return result


def native_dtype(dtype: Any) -> str | None:
    """What the native module is asked to produce for a final `dtype` (numpy or torch), from
    which a cast to `dtype` is exact: None when there is no such output (complex, object, ...)."""
    name = str(dtype).removeprefix("torch.")
    if name == "bool":
        return "bool"
    if name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        return "int64"
    if name == "float64":
        return "float64"
    if name in ("float32", "float16", "bfloat16"):
        return "float32"
    return None
