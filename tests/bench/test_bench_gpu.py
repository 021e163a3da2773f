"""benches/bench_gpu.py runs: on the CPU with tiny models and one step per configuration, it
writes a record with every configuration and field. No timing is asserted (the figures mean
something only on a GPU)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.support.repository import ROOT

SCRIPT = ROOT / "benches" / "bench_gpu.py"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def bench_module():
    spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_gpu"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_configuration_the_issue_asks_for():
    names = {config.name for config in bench_module().all_configs()}
    for loop in ("trainer", "accelerate"):
        for task, layout in (("bert", "padded"), ("lm", "padded"), ("lm", "packed")):
            for workers in (0, 2, 4):
                assert f"{loop}/{task}/transformers-{layout}/w{workers}" in names
            for workers in (0, 2):
                assert f"{loop}/{task}/fastcollate-{layout}/w{workers}" in names
        assert f"{loop}/bert/fastcollate-padded-pinned/w0" in names
    # fastcollate.Trainer as a user runs it: bert, and the LM padded and packed.
    for task, layout in (("bert", "padded"), ("lm", "padded"), ("lm", "packed")):
        assert f"fastcollate-trainer/{task}/fastcollate-{layout}/w0" in names
    assert len(names) == 35


@pytest.mark.slow
def test_runs_on_cpu_with_tiny_models(tmp_path):
    record_path, plot_path = tmp_path / "gpu.json", tmp_path / "gpu.png"
    command = [
        sys.executable,
        str(SCRIPT),
        "--device", "cpu",
        "--tiny",
        "--steps", "1",
        "--warmup", "0",
        "--json", str(record_path),
        "--plot", str(plot_path),
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads(record_path.read_text())
    assert plot_path.stat().st_size > 0
    assert record["device"]["type"] == "cpu"
    assert record["settings"] == {
        "tiny": True, "steps": 1, "warmup": 0, "batch_size": 4, "max_tokens": 32, "bf16": False,
        "packed_tokens_per_row": 32,
    }  # fmt: skip
    for key in ("torch", "transformers", "accelerate", "fastcollate", "build_profile"):
        assert key in record["environment"]
    names = [r["name"] for r in record["results"]]
    assert names == [config.name for config in bench_module().all_configs()]
    for result in record["results"]:
        assert result["name"] in done.stdout
        if result["pinning"] == "collator" or "pinned" in result["name"]:
            # No pinned memory without CUDA: recorded, not run.
            assert result["status"] == "skipped" and "CUDA" in result["reason"]
            assert all(result[field] is None for field in record["fields"])
            continue
        assert result["status"] == "ok", result
        assert result["steps"] == 1
        for field in record["fields"]:
            assert isinstance(result[field], float) and result[field] >= 0, (field, result)
        assert result["steps_per_s"] > 0 and result["tokens_per_s"] > 0
        assert 0 <= result["data_wait_share"] <= 1
        assert 0 <= result["padding_share"] < 1
        if result["layout"] == "packed":
            assert result["padding_share"] == 0  # one flattened row: no pad position
