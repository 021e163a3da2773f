"""Times the set-up steps a newcomer waits for, and writes them with the machine's load:

    python benches/measure_setup.py --json benches/results/setup_times.json

- `build`: compiling the extension as `pip install .` does (`maturin build --release`, the
  release profile's fat LTO), from an empty cargo target folder, the crates already fetched.
- `tests`: the README's test run, `python -m pytest -q`, in the environment running this
  script (a release build of fastcollate installed in it).

The installs (`pip install '.[transformers]'` and the like) are not timed here: they download
torch and the rest, so their time is mostly the network's and pip's cache's.

Each step records its wall time and the 1-minute load average sampled every 5 seconds while it
ran: on a machine with other work running a step takes longer, and the figures say so.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from fastcollate.bench import report

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("build", "tests")


def step_command(step: str, scratch: Path) -> tuple[list[str], str]:
    """The command a step runs, and how the results file names it."""
    if step == "build":
        command = [
            "maturin", "build", "--release", "--offline",
            "--target-dir", str(scratch / "target"), "--out", str(scratch / "wheel"),
        ]
        return command, "maturin build --release (an empty target folder)"
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], "python -m pytest -q"


def run_step(step: str, scratch: Path) -> dict[str, Any]:
    """Runs one step, sampling the load average meanwhile; its wall seconds, load and outcome."""
    command, words = step_command(step, scratch)
    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(5.0):
            load = report.load_average()
            if load is not None:
                samples.append(load)

    sampler = threading.Thread(target=sample, daemon=True)
    before = report.load_average()
    start = time.perf_counter()
    sampler.start()
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    tail = (completed.stdout + completed.stderr).strip().splitlines()[-1:]
    result: dict[str, Any] = {
        "step": step,
        "command": words,
        "wall_seconds": round(seconds, 1),
        "load_average_before": before,
        "load_average_mean": round(sum(samples) / len(samples), 2) if samples else before,
        "load_average_max": max(samples) if samples else before,
        "returncode": completed.returncode,
        "last_line": tail[0] if tail else "",
    }
    if step == "tests":
        counts = re.findall(r"(\d+) (passed|failed|skipped|errors?)", result["last_line"])
        result["counts"] = {kind: int(n) for n, kind in counts}
    return result


def rustc_version() -> str | None:
    try:
        out = subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="where to write the results")
    parser.add_argument("--steps", default=",".join(STEPS), help="comma-separated: build,tests")
    args = parser.parse_args(argv)
    steps = args.steps.split(",")
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"unknown steps: {', '.join(unknown)}")
    env = report.environment()
    env["rustc"] = rustc_version()
    results = []
    with tempfile.TemporaryDirectory(prefix="fastcollate-setup-") as scratch:
        for step in steps:
            result = run_step(step, Path(scratch))
            print(f"{step}: {result['wall_seconds']} s, load average {result['load_average_mean']}"
                  f" (max {result['load_average_max']}), exit {result['returncode']}", flush=True)
            results.append(result)
        shutil.rmtree(scratch, ignore_errors=True)
    env["load_average"] = report.load_average()
    record = {"environment": env, "results": results}
    report.write_json(record, args.json)
    return 0 if all(r["returncode"] == 0 for r in results) else 1


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
