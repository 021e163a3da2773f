"""The end of a torchrun test script, shared by every such script: write this rank's report and
take the process group down."""

from __future__ import annotations

import json
import os

import torch


def finish_rank(out: str, rank: int, report: dict) -> None:
    """Writes `report` to OUT/rank{N}.json, then destroys the process group. Left to interpreter
    shutdown, a rank can abort in gloo's destructors ("terminate called without an active
    exception") after training has finished."""
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
