"""The GPU session in one command: the environment checked, the sent wheels installed, the
pinned-output tests run on CUDA, then the training loops timed (benches/bench_gpu.py's), and
one results file written: benches/results/gpu_<device>.json.

    bash benches/gpu_wheels.sh              # here, with network: fills .gpu_wheels/ (git-ignored)
    python3 benches/gpu_run.py              # there, on the GPU machine: at most 8 minutes
    python3 benches/gpu_run.py --device cpu --tiny --out /tmp/x.json  # the same steps on a CPU

The steps, each timed and recorded:

1. the environment: Python, torch and its CUDA, the device, transformers, accelerate,
   pyarrow, pandas, psutil; versions other than the ones the machine was recorded with are
   reported, not refused;
2. the wheels in `--wheels` (default `.gpu_wheels/`): fastcollate's cp312 manylinux wheel,
   datasets and its missing dependencies, pytest and hypothesis; unpacked (no pip, no network)
   into a folder put first on the path of this process and its children, with any folder of
   `.gpu_wheels/site/` (the test model's tokenizer files) beside them; then each is imported;
3. the pinned-output tests (`tests/collators/test_pin_memory.py`, whose `cuda` tests run only
   on a GPU) with pytest; a failure is recorded, and the timings still run;
4. the training loops, the same rows and seeds for each, `--steps` measured steps after
   `--warmup` (60 after 10 on a GPU), batch 32, `dataloader_num_workers=0`:
   - BERT-base sequence classification from its config (random weights), IMDB-like rows:
     `transformers.Trainer` with transformers' `DataCollatorWithPadding` against
     `fastcollate.Trainer` as a user runs it (its own collator, batches read from Arrow,
     pinned output filled in place): steps/s and the data-wait share;
   - a ~0.5B causal LM from Qwen2.5-0.5B's config: `transformers.Trainer` padded, and
     `fastcollate.Trainer` padded and packed (`train_sampling_strategy="packed"`): tokens/s
     and the padding share;
   configurations not started by `--budget` seconds after the start are recorded as skipped;
5. the record: the device, the versions, every step's time, every figure.

`--device cpu --tiny` (tiny model configs, rows cut to 32 tokens, 2 steps) runs every step but
the CUDA ones on any machine: tests/bench/test_gpu_run.py runs it, so only the CUDA parts are
new on the GPU. Its figures mean nothing, and it refuses to write into benches/results/.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benches" / "results"
WHEELS = ROOT / ".gpu_wheels"
# The machine as recorded: differences are reported in the record, not refused.
EXPECTED = {"python": "3.12", "torch": "2.11", "transformers": "5.17", "accelerate": "1.15"}
# The distributions whose versions the record keeps.
DISTRIBUTIONS = (
    "torch", "transformers", "accelerate", "datasets", "pyarrow", "pandas", "numpy", "psutil",
    "pytest", "hypothesis", "fastcollate",
)  # fmt: skip
# What must import once the wheels are in.
IMPORTS = ("fastcollate", "datasets", "pytest", "hypothesis", "transformers", "accelerate")
TESTS = ["tests/collators/test_pin_memory.py"]
# The timed configurations (benches/bench_gpu.py's names), in the order they run.
CONFIGS = (
    "trainer/bert/transformers-padded/w0",
    "fastcollate-trainer/bert/fastcollate-padded/w0",
    "trainer/lm/transformers-padded/w0",
    "fastcollate-trainer/lm/fastcollate-padded/w0",
    "fastcollate-trainer/lm/fastcollate-packed/w0",
)
BUDGET_S = 420  # no configuration starts later than this after the start: 8 minutes in all
TESTS_TIMEOUT_S = 240


def device_slug(name: str) -> str:
    """`NVIDIA H200` -> `nvidia_h200`: the results file's name part."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "unknown"


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def check_environment(device: str) -> dict[str, Any]:
    """Python, the device and the versions; what differs from the recorded machine."""
    import torch

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "cpu_count": os.cpu_count(),
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "versions": versions(),
    }
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("error: --device cuda but torch.cuda.is_available() is False")
        env["device_name"] = torch.cuda.get_device_name(0)
        env["device_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30)
    else:
        env["device_name"] = "cpu"
    have = {"python": env["python"], **env["versions"]}
    env["differs_from_recorded"] = {
        name: have.get(name)
        for name, prefix in EXPECTED.items()
        if device == "cuda" and not str(have.get(name) or "").startswith(prefix)
    }
    return env


def unpack_wheels(folder: Path, target: Path) -> list[str]:
    """Every wheel in `folder` unpacked into `target` (a wheel is a zip of the files as they
    lie in site-packages, its `*.data/purelib|platlib` folders included), and every folder of
    `folder/site` copied there. Returns what was put in."""
    installed = []
    target.mkdir(parents=True, exist_ok=True)
    for wheel in sorted(folder.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
        for data in target.glob("*.data"):
            for scheme in ("purelib", "platlib"):
                if (data / scheme).is_dir():
                    shutil.copytree(data / scheme, target, dirs_exist_ok=True)
            shutil.rmtree(data)
        installed.append(wheel.name)
    site = folder / "site"
    if site.is_dir():
        for package in sorted(p for p in site.iterdir() if p.is_dir()):
            shutil.copytree(package, target / package.name, dirs_exist_ok=True)
            installed.append(f"site/{package.name}")
    return installed


def check_imports() -> dict[str, str]:
    """Each of IMPORTS imported: where from, or the error."""
    found = {}
    for name in IMPORTS:
        try:
            module = importlib.import_module(name)
            found[name] = str(Path(module.__file__ or "?").parent)
        except Exception as err:  # noqa: BLE001 - reported in the record, then the run stops
            found[name] = f"error: {type(err).__name__}: {err}"
    return found


def run_tests(env: dict[str, str], timeout: int) -> dict[str, Any]:
    """The pinned-output tests with pytest, the repository's own options but the plugins it
    may not have (`-o addopts=`); the summary line and the exit code."""
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
               "-o", "addopts=", *TESTS]  # fmt: skip
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as err:
        tail = (err.stdout or b"")[-2000:]
        return {"command": command, "returncode": None, "summary": "timed out",
                "tail": tail.decode() if isinstance(tail, bytes) else tail}  # fmt: skip
    lines = done.stdout.strip().splitlines()
    print(done.stdout[-3000:], done.stderr[-2000:], sep="\n", flush=True)
    return {
        "command": command,
        "returncode": done.returncode,
        "summary": lines[-1] if lines else "",
        "skipped": [line for line in lines if line.startswith("SKIPPED")],
        "tail": "" if done.returncode == 0 else (done.stdout + done.stderr)[-4000:],
    }


def load_bench_gpu():
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benches" / "bench_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_gpu"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny models, a few steps: a check")
    parser.add_argument("--steps", type=int, help="measured steps per loop (default 60; 2 --tiny)")
    parser.add_argument("--warmup", type=int, help="steps first (default 10; 1 with --tiny)")
    parser.add_argument("--wheels", type=Path, default=WHEELS,
                        help="folder of wheels to install first (default .gpu_wheels/; "
                        "none there: nothing installed)")  # fmt: skip
    parser.add_argument("--no-tests", action="store_true", help="skip the pytest step")
    parser.add_argument("--budget", type=float, default=BUDGET_S,
                        help=f"seconds after which no loop starts (default {BUDGET_S})")
    parser.add_argument("--out", type=Path,
                        help="the results file (default benches/results/gpu_<device>.json on "
                        "a GPU; required with --device cpu)")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    # No network there: the hub is never asked (set before transformers is first imported).
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.device == "cpu" and not args.tiny:
        parser.error("--device cpu is a check of the script: add --tiny")
    if args.device == "cpu" and (args.out is None or args.out.resolve().parent == RESULTS_DIR):
        parser.error("--device cpu: give --out outside benches/results/ (CPU figures are not "
                     "published)")  # fmt: skip
    steps: dict[str, float] = {}
    record: dict[str, Any] = {"benchmark": "gpu_run", "argv": sys.argv[1:]}

    mark = time.perf_counter()
    record["environment_check"] = check_environment(args.device)
    steps["environment_s"] = time.perf_counter() - mark
    print(json.dumps(record["environment_check"], indent=1), flush=True)

    mark = time.perf_counter()
    child_env = dict(os.environ)
    site = None
    if args.wheels.is_dir() and any(args.wheels.iterdir()):
        site = Path(tempfile.mkdtemp(prefix="fastcollate-gpu-site-"))
        record["installed"] = unpack_wheels(args.wheels, site)
        sys.path.insert(0, str(site))
        child_env["PYTHONPATH"] = os.pathsep.join(
            [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
    else:
        record["installed"] = []
    importlib.invalidate_caches()
    record["imports"] = check_imports()
    record["versions"] = versions()
    steps["install_s"] = time.perf_counter() - mark
    broken = {k: v for k, v in record["imports"].items() if v.startswith("error")}
    if broken:
        print(f"error: cannot import {broken}", file=sys.stderr)

    mark = time.perf_counter()
    if args.no_tests or broken:
        record["tests"] = None
    else:
        record["tests"] = run_tests(child_env, TESTS_TIMEOUT_S)
    steps["tests_s"] = time.perf_counter() - mark

    bench = None
    if not broken:
        mark = time.perf_counter()
        bench = load_bench_gpu()
        options = ["--device", args.device, "--loops", "trainer", "fastcollate-trainer",
                   "--configs", *CONFIGS]  # fmt: skip
        options += ["--tiny"] if args.tiny else []
        options += [] if args.steps is None else ["--steps", str(args.steps)]
        options += [] if args.warmup is None else ["--warmup", str(args.warmup)]
        _, settings = bench.parse(options)
        configs = sorted(bench.selected(settings), key=lambda c: CONFIGS.index(c.name))
        if not args.tiny:
            bench.timing.require_release_build()
        results = bench.measure(
            settings, configs, deadline=started + args.budget, keep_going=True
        )
        measured = bench.make_record(settings, results)
        record.update({k: measured[k] for k in ("device", "environment", "settings", "fields")})
        record["results"] = results
        steps["loops_s"] = time.perf_counter() - mark
        print(bench.title(settings, measured["device"], measured["environment"]))
        print(bench.format_table(results), flush=True)

    steps["total_s"] = time.perf_counter() - started
    record["steps"] = {k: round(v, 2) for k, v in steps.items()}
    out = args.out
    if out is None:
        out = RESULTS_DIR / f"gpu_{device_slug(record['environment_check']['device_name'])}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print(f"wrote {out} after {steps['total_s']:.0f} s", flush=True)
    if site is not None:
        shutil.rmtree(site, ignore_errors=True)
    failed_tests = record["tests"] is not None and record["tests"]["returncode"] != 0
    failed_loops = [r["name"] for r in record.get("results", []) if r["status"] != "ok"]
    if failed_loops:
        print(f"not measured: {', '.join(failed_loops)}", file=sys.stderr)
    return 1 if broken or failed_tests or failed_loops or bench is None else 0


if __name__ == "__main__":
    sys.exit(main())
