"""Soak run of the hostile-input fuzzer (tests/support/fuzz_cases.py) over many seeds, reporting
counts: calls, outcomes (fastcollate vs transformers), outputs compared, violations (crashes,
panics, wrong exception types, changed inputs, outputs that differ from transformers').

    python benches/soak_fuzz.py [--cases 100000] [--workers 2] [--start 0]

Each worker is a separate process fed one seed at a time; a worker that dies (abort,
segfault) is counted as a crash with its seed and replaced. Exit code 1 when any violation
was found.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import select
import subprocess
import sys
import time

# The worker runs as `python -m tests.support.fuzz_cases` from the repository root.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = 500


def run_range(seeds) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fuzz_cases"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    process.stdin.write("".join(f"{seed}\n" for seed in seeds))
    process.stdin.close()
    return process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--start", type=int, default=0)
    args = parser.parse_args()

    pending = collections.deque(
        range(start, min(start + BATCH, args.start + args.cases))
        for start in range(args.start, args.start + args.cases, BATCH)
    )
    running: dict = {}
    outcomes: collections.Counter = collections.Counter()
    entries: collections.Counter = collections.Counter()
    violations: list = []
    compared = calls = 0
    began = time.perf_counter()
    while pending or running:
        while pending and len(running) < args.workers:
            seeds = pending.popleft()
            process = run_range(seeds)
            running[process.stdout] = (process, seeds, set(seeds))
        ready, _, _ = select.select(list(running), [], [], 120)
        for stream in ready:
            process, seeds, left = running[stream]
            line = stream.readline()
            if line:
                result = json.loads(line)
                left.discard(result["seed"])
                calls += 1
                entries[result.get("entry")] += 1
                outcomes[(result.get("ours"), result.get("theirs"))] += 1
                compared += bool(result.get("compared"))
                violations.extend((result["seed"], v) for v in result["violations"])
                continue
            process.wait()
            del running[stream]
            if left:
                # The worker died: the first unanswered seed crashed it; the rest run again.
                crashed = min(left)
                violations.append((crashed, f"worker died (exit {process.returncode})"))
                calls += 1
                rest = [s for s in seeds if s in left and s != crashed]
                if rest:
                    pending.append(rest)
    elapsed = time.perf_counter() - began

    print(f"calls: {calls} in {elapsed:.0f} s ({args.workers} workers)")
    print("by entry point: " + ", ".join(f"{k} {v}" for k, v in sorted(entries.items(), key=str)))
    ok_both = outcomes[("ok", "ok")]
    print(f"both succeeded: {ok_both}; outputs compared (identical required): {compared}")
    ours_raised = sum(v for (ours, _), v in outcomes.items() if ours not in ("ok", None))
    print(f"fastcollate raised a ValueError/TypeError (or transformers' type): {ours_raised}")
    print("top outcomes (fastcollate, transformers):")
    for (ours, theirs), count in outcomes.most_common(12):
        print(f"  {ours:>24} {theirs:>24} {count}")
    print(f"violations: {len(violations)}")
    for seed, violation in violations[:50]:
        print(f"  seed {seed}: {violation[:300]}")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
