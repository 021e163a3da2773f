"""Launching a tests/support script on two processes with torchrun (gloo on CPU)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.repository import child_env

WORLD_SIZE = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(out: Path, seed: int, module: str = "tests.support.multiprocess_train") -> list[dict]:
    """Runs the script `module` (a tests.support module, started as with `python -m`) on
    WORLD_SIZE processes; returns each rank's OUT/rank{N}.json."""
    out.mkdir()
    # torchrun is this module; run through this interpreter, the ranks use it too (a `torchrun`
    # found on PATH may belong to another environment).
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={WORLD_SIZE}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "--module",
        module,
        "--out",
        str(out),
        "--seed",
        str(seed),
    ]
    env = child_env(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(WORLD_SIZE)]
