"""`python -m fastcollate`: the command line's arguments, progress, --json and --plot (no
timings are asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import fastcollate
from fastcollate import __main__ as cli
from fastcollate import _bench


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fastcollate", *args], capture_output=True, text=True, timeout=300
    )


def test_version():
    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.split()[:2] == ["fastcollate", fastcollate.__version__]


def test_help_lists_cases_and_defaults(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for case in _bench.CASES:
        assert _bench.short_name(case.name) in text
    assert "default: 8,32,128,512; with --quick: 8,32" in text
    assert "default: 7; with --quick: 3" in text
    for option in ("--json FILE", "--plot FILE.png", "--formats", "--quick"):
        assert option in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["--repeat", "0"], "--repeat: must be at least 1, got 0"),
        (["--repeat", "-2"], "--repeat: must be at least 1, got -2"),
        (["--repeat", "x"], "--repeat: not an integer"),
        (["--batch-sizes", "8,0"], "batch sizes must be positive"),
        (["--formats", "lists,arrow"], "unknown row format(s) arrow"),
        (["--cases", "WithPadding,Nope"], "unknown case(s) Nope; choose from WithPadding"),
    ],
)
def test_bad_arguments_are_rejected_before_running(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_cases_accept_short_and_full_names_in_any_case():
    assert _bench.resolve_cases(["WithPadding", "forseq2seq", "DataCollatorWithPadding"]) == [
        "DataCollatorWithPadding",
        "DataCollatorForSeq2Seq",
    ]
    for case in _bench.CASES:
        assert _bench.resolve_cases([_bench.short_name(case.name)]) == [case.name]
    with pytest.raises(ValueError, match="choose from"):
        _bench.resolve_cases(["Padding"])


def test_no_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([])
    assert exit_info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_a_run_counts_progress_and_writes_json_and_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    figures, picture = tmp_path / "bench.json", tmp_path / "bench.png"
    code = cli.main(
        [
            "bench",
            "--quick",
            "--cases",
            "WithPadding,ForTokenClassification",
            "--formats",
            "lists,numpy",
            "--batch-sizes",
            "2,3",
            "--repeat",
            "1",
            "--json",
            str(figures),
            "--plot",
            str(picture),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    progress = [line.split("]")[0] + "]" for line in err.splitlines() if line.startswith("[")]
    assert progress == [f"[{i}/8]" for i in range(1, 9)]
    assert "WithPadding" in out and "ForTokenClassification" in out

    data = json.loads(figures.read_text())
    env = data["environment"]
    assert env["fastcollate"] == fastcollate.__version__
    assert env["build_profile"] == "release"
    for key in ("cpu", "cpu_count", "python", "numpy", "torch", "transformers"):
        assert env[key]
    assert data["settings"]["repeat"] == 1
    assert data["settings"]["arguments"]["batch_sizes"] == [2, 3]
    assert data["settings"]["arguments"]["quick"] is True
    seen = {(r["case"], r["format"], r["batch_size"]) for r in data["results"]}
    assert seen == {
        (case, fmt, size)
        for case in ("DataCollatorWithPadding", "DataCollatorForTokenClassification")
        for fmt in ("lists", "numpy")
        for size in (2, 3)
    }
    for r in data["results"]:
        assert r["ms_per_batch"]["transformers"] > 0 and r["ms_per_batch"]["fastcollate"] > 0
        assert r["speedup_vs_transformers"] == pytest.approx(
            r["ms_per_batch"]["transformers"] / r["ms_per_batch"]["fastcollate"]
        )
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_refused_before_running(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    code = cli.main(["bench", "--quick", "--plot", "x.png"])
    assert code == 1
    assert "pip install 'fastcollate[plot]'" in capsys.readouterr().err
