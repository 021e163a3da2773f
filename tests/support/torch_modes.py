"""torch function modes that lie about what a tensor reports, or move its memory mid-call:
shared by tests/collators/test_torch_function_modes.py and the fuzz family in
tests/support/fuzz_cases.py."""

from __future__ import annotations

import numpy as np
import torch
from torch.overrides import TorchFunctionMode


class Lie(TorchFunctionMode):
    """Answers `target` (a torch function, method or property getter) with `answer()`."""

    def __init__(self, target, answer):
        super().__init__()
        self.target, self.answer = target, answer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is self.target:
            return self.answer()
        return func(*args, **(kwargs or {}))


Tensor = torch.Tensor
# Every question the read paths (or anyone reading a tensor) could ask, with a false answer
# that would read out of bounds, read the wrong values or skip a negation if believed.
LIES = {
    "data_ptr": (Tensor.data_ptr, lambda: 4096),
    "len": (Tensor.__len__, lambda: 1 << 26),
    "is_contiguous": (Tensor.is_contiguous, lambda: True),
    "dtype": (Tensor.dtype.__get__, lambda: torch.int8),
    "shape": (Tensor.shape.__get__, lambda: torch.Size([1 << 26])),
    "size": (Tensor.size, lambda: torch.Size([1 << 26])),
    "stride": (Tensor.stride, lambda: (0,)),
    "storage_offset": (Tensor.storage_offset, lambda: 1 << 40),
    "is_neg": (Tensor.is_neg, lambda: False),
    "is_neg_true": (Tensor.is_neg, lambda: True),
    "numel": (Tensor.numel, lambda: 1 << 26),
    "device": (Tensor.device.__get__, lambda: torch.device("cpu")),
    "is_cpu": (Tensor.is_cpu.__get__, lambda: True),
    "ndim": (Tensor.ndim.__get__, lambda: 1),
    "dim": (Tensor.dim, lambda: 1),
    "element_size": (Tensor.element_size, lambda: 1),
    "tolist": (Tensor.tolist, lambda: [7, 7, 7]),
    "item": (Tensor.item, lambda: 1 << 70),
    "numpy": (Tensor.numpy, lambda: np.zeros(1 << 20)),
    "cat": (torch.cat, lambda: torch.zeros(1 << 20, dtype=torch.int64)),
}


class Move(TorchFunctionMode):
    """On every torch call, moves each victim's values to new memory (keeping them) and
    scribbles over what it freed: a read through a pointer taken before sees the scribbles,
    or crashes. `how`: "resize" (grown, then shrunk back) or "set" (`set_` to a copy)."""

    def __init__(self, victims, how):
        super().__init__()
        # Only tensors whose values a move keeps: dense, contiguous CPU tensors that are not
        # views, without autograd or a pending negation.
        self.victims = [
            victim for victim in victims
            if victim.layout == torch.strided and victim.device.type == "cpu"
            and victim.is_contiguous() and victim._base is None
            and victim.storage_offset() == 0 and not victim.requires_grad
            and not victim.is_neg() and not victim.is_conj()
        ]  # fmt: skip
        self.how = how

    def __torch_function__(self, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunction():
            for victim in self.victims:
                length, shape = victim.numel(), victim.shape
                moved = False
                if self.how == "resize":
                    try:
                        victim.resize_(1 << 18)  # a new, larger block: the old one is freed
                        moved = True
                    except RuntimeError:  # a storage torch does not resize (numpy's)
                        pass
                    victim.resize_(shape)  # (a refused resize_ changed the shape still)
                if not moved:
                    victim.set_(victim.clone())
                # Blocks of the freed size, filled, so a stale read shows.
                _scribble = [torch.full((length + k,), -777) for k in range(4)]
                del _scribble
        return func(*args, **(kwargs or {}))
