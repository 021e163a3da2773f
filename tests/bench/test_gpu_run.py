"""benches/gpu_run.py, the GPU session in one command, run on the CPU with tiny models
(`--device cpu --tiny`): every step but the CUDA ones (environment, wheels, the pinned-output
tests, the training loops, the record), so that on a GPU only the CUDA parts are new. No
timing is asserted: CPU figures of tiny models mean nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile

import pytest

from tests.support.repository import ROOT

SCRIPT = ROOT / "benches" / "gpu_run.py"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def gpu_run():
    spec = importlib.util.spec_from_file_location("gpu_run", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_results_file_is_named_by_the_device():
    module = gpu_run()
    assert module.device_slug("NVIDIA H200") == "nvidia_h200"
    assert module.device_slug("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3"


def test_wheels_and_site_folders_are_unpacked(tmp_path):
    wheels = tmp_path / "wheels"
    (wheels / "site" / "a_model").mkdir(parents=True)
    (wheels / "site" / "a_model" / "vocab.txt").write_text("[PAD]\n")
    with zipfile.ZipFile(wheels / "demo-1.0-py3-none-any.whl", "w") as archive:
        archive.writestr("demo/__init__.py", "VALUE = 1\n")
        archive.writestr("demo-1.0.dist-info/METADATA", "Name: demo\nVersion: 1.0\n")
        archive.writestr("demo-1.0.data/purelib/demo_extra.py", "X = 2\n")
    target = tmp_path / "site"
    installed = gpu_run().unpack_wheels(wheels, target)
    assert installed == ["demo-1.0-py3-none-any.whl", "site/a_model"]
    assert (target / "demo" / "__init__.py").read_text() == "VALUE = 1\n"
    assert (target / "demo_extra.py").exists() and not list(target.glob("*.data"))
    assert (target / "a_model" / "vocab.txt").exists()


def test_cpu_figures_are_not_written_among_the_published_ones():
    for argv in (["--device", "cpu", "--tiny"],
                 ["--device", "cpu", "--tiny", "--out", "benches/results/gpu_x.json"],
                 ["--device", "cpu", "--out", "/tmp/x.json"]):  # fmt: skip
        done = subprocess.run([sys.executable, str(SCRIPT), *argv], cwd=ROOT, env=ENV,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 2, argv
        assert "--device cpu" in done.stderr


@pytest.mark.slow
def test_runs_every_step_on_cpu_with_tiny_models(tmp_path):
    out = tmp_path / "gpu_cpu.json"
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    command = [sys.executable, str(SCRIPT), "--device", "cpu", "--tiny", "--steps", "1",
               "--warmup", "0", "--wheels", str(empty), "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, env=ENV, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["environment_check"]["device_name"] == "cpu"
    assert record["installed"] == []
    assert all(not where.startswith("error") for where in record["imports"].values())
    # The pinned-output tests ran and passed (their CUDA tests skipped on this machine).
    assert record["tests"]["returncode"] == 0, record["tests"]
    assert "passed" in record["tests"]["summary"]
    assert record["device"]["type"] == "cpu" and record["settings"]["tiny"] is True
    module = gpu_run()
    assert [r["name"] for r in record["results"]] == list(module.CONFIGS)
    for result in record["results"]:
        assert result["status"] == "ok", result
        for field in ("steps_per_s", "tokens_per_s", "data_wait_share", "padding_share"):
            assert isinstance(result[field], float), (field, result)
    packed = record["results"][-1]
    assert packed["layout"] == "packed" and packed["padding_share"] == 0
    for step in ("environment_s", "install_s", "tests_s", "loops_s", "total_s"):
        assert record["steps"][step] >= 0
