"""`python -m fastcollate`: the command line's arguments, progress, --json and --plot (no
timings are asserted)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import pytest

import fastcollate
from fastcollate import __main__ as entry
from fastcollate._internal.extras import install_command
from fastcollate.bench import cli, sampling, timing
from fastcollate.bench.cases import CASES, resolve_cases, short_name


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fastcollate", *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def nothing_runs(monkeypatch):
    """Makes any benchmark that starts fail the test: usage errors must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr(timing, "run", refuse)
    monkeypatch.setattr(sampling, "run", refuse)


def test_version():
    done = run_cli("--version")
    assert done.returncode == 0
    assert done.stdout.split()[:2] == ["fastcollate", fastcollate.__version__]


def test_help_lists_cases_and_defaults(capsys):
    with pytest.raises(SystemExit) as exit_info:
        entry.main(["bench", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for case in CASES:
        assert short_name(case.name) in text
    assert "default: 8,32,128,512; with --quick: 8,32" in text
    assert "default: 7; with --quick: 3" in text
    assert "default: 200,000; with --quick: 20,000" in text
    for option in ("--json FILE", "--plot FILE.png", "--formats", "--quick", "--rows N"):
        assert option in text
    assert "--batch-size " not in text  # the deprecated alias is hidden


def test_every_option_has_help_that_shows_its_default():
    parser = cli.add_bench_arguments(argparse.ArgumentParser())
    options = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    assert len(options) >= 13
    for action in options:
        if action.help == argparse.SUPPRESS:
            assert action.option_strings == ["--batch-size"]
            continue
        assert action.help and "(default: " in action.help, action.option_strings


def test_batch_size_is_a_deprecated_alias(capsys):
    parser = cli.add_bench_arguments(argparse.ArgumentParser(prog="bench"))
    args = parser.parse_args(["--batch-size", "6"])
    assert args.batch_sizes == [6]
    assert "warning: --batch-size is deprecated; use --batch-sizes 6" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--repeat", "0"], "--repeat: must be at least 1, got 0"),
        (["--repeat", "-2"], "--repeat: must be at least 1, got -2"),
        (["--repeat", "x"], "--repeat: not an integer"),
        (["--batch-sizes", "8,0"], "batch sizes must be positive"),
        (["--formats", "lists,arrow"], "unknown row format(s) arrow"),
        (["--cases", "WithPadding,Nope"], "unknown case(s) Nope; choose from WithPadding"),
        (["--sampling", "--rows", "0"], "--rows: must be at least 1, got 0"),
        (["--sampling", "--batch-sizes", "8,32"], "--sampling takes one batch size"),
        (["--sampling", "--repeat", "3", "--cases", "WithPadding"], "--repeat, --cases: only "),
        (["--sampling", "--formats", "lists"], "--formats: only without --sampling"),
        (["--rows", "10", "--no-transformers"], "--rows, --no-transformers: only with --sampling"),
        (["--max-tokens", "64"], "--max-tokens: only with --sampling"),
    ],
)
def test_bad_arguments_are_rejected_before_running(args, message, capsys, nothing_runs):
    with pytest.raises(SystemExit) as exit_info:
        entry.main(["bench", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("mode", [[], ["--sampling"]])
@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_unwritable_outputs_are_refused_before_running(
    mode, option, tmp_path, capsys, nothing_runs
):
    for path, reason in [
        (tmp_path / "missing" / "out.png", "No such file or directory"),
        (tmp_path, "it is a directory"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            entry.main(["bench", *mode, option, str(path)])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert f"error: argument {option}: cannot write '{path}': {reason}" in err
    assert list(tmp_path.iterdir()) == []  # the check leaves no file behind


def test_a_plot_needs_a_picture_extension(tmp_path, capsys, nothing_runs):
    pytest.importorskip("matplotlib")
    with pytest.raises(SystemExit) as exit_info:
        entry.main(["bench", "--plot", str(tmp_path / "speedups")])
    assert exit_info.value.code == 2
    assert "needs a picture file extension: " in capsys.readouterr().err


def test_an_unwritable_output_is_one_error_line_without_traceback(tmp_path):
    done = run_cli("bench", "--sampling", "--json", str(tmp_path / "no" / "such.json"))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("python -m fastcollate bench: error: ")


def test_cases_accept_short_and_full_names_in_any_case():
    assert resolve_cases(["WithPadding", "forseq2seq", "DataCollatorWithPadding"]) == [
        "DataCollatorWithPadding",
        "DataCollatorForSeq2Seq",
    ]
    for case in CASES:
        assert resolve_cases([short_name(case.name)]) == [case.name]
    with pytest.raises(ValueError, match="choose from"):
        resolve_cases(["Padding"])


def test_no_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        entry.main([])
    assert exit_info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_a_run_counts_progress_and_writes_json_and_plot(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    figures, picture = tmp_path / "bench.json", tmp_path / "bench.png"
    argv = [
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
    # The results file records the command line the process was started with.
    monkeypatch.setattr(sys, "argv", [entry.__file__, *argv])
    code = entry.main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    progress = [line.split("]")[0] + "]" for line in err.splitlines() if line.startswith("[")]
    assert progress == [f"[{i}/8]" for i in range(1, 9)]
    assert "WithPadding" in out and "ForTokenClassification" in out
    # The report says what was checked before timing, and stays within 100 columns.
    assert "Checked before timing: each configuration gave transformers' output" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert max(len(line) for line in err.splitlines()) <= 100
    assert re.search(r"^took \d+ s$", out, re.MULTILINE)

    data = json.loads(figures.read_text())
    env = data["environment"]
    assert env["fastcollate"] == fastcollate.__version__
    assert env["build_profile"] == "release"
    for key in ("cpu", "cpu_count", "python", "numpy", "torch", "transformers", "date"):
        assert env[key]
    # The command that wrote the file, as a user would type it.
    assert env["command"].startswith("python -m fastcollate bench --quick --cases WithPadding")
    assert env["command"].endswith(f"--json {figures} --plot {picture}")
    assert env["wall_seconds"] > 0
    assert data["settings"]["repeat"] == 1
    assert data["settings"]["arguments"] == {
        "quick": True,
        "batch_sizes": [2, 3],
        "formats": ["lists", "numpy"],
        "repeat": 1,
        "cases": ["DataCollatorWithPadding", "DataCollatorForTokenClassification"],
    }
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


def test_plot_without_matplotlib_is_refused_before_running(monkeypatch, capsys, nothing_runs):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    code = entry.main(["bench", "--quick", "--plot", "x.png"])
    assert code == 1
    assert install_command("plot") in capsys.readouterr().err


def test_benches_script_takes_the_same_options(capsys, nothing_runs):
    with pytest.raises(SystemExit) as exit_info:
        cli.bench_main(["--help"], prog="benches/bench_collate.py")
    assert exit_info.value.code == 0
    assert "usage: benches/bench_collate.py" in capsys.readouterr().out


# `--cases trl`: TRL's collators, dataset preparation and pack_dataset.


def test_trl_cases_print_every_path_with_ratios_and_write_json(tmp_path, capsys):
    pytest.importorskip("trl")
    from fastcollate.bench import trl_suite

    figures = tmp_path / "trl.json"
    code = entry.main(
        ["bench", "--cases", "trl", "--quick", "--batch-sizes", "4,8", "--repeat", "1"]
        + ["--json", str(figures)]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.count("trl 1.") == 1 and "fastcollate 0." in out
    collator_rows = {}
    for line in out.splitlines():
        cells = line.rsplit(maxsplit=4)
        if len(cells) == 5 and cells[-1].endswith("x") and cells[1] in ("4", "8"):
            collator_rows[(cells[0], int(cells[1]))] = float(cells[-1][:-1])
    names = [
        "SFT padded",
        "SFT padding-free",
        "SFT packed (bfd)",
        "SFT padded, Arrow",
        "DPO",
        "DPO 512 keep_end",
        "reward",
        "KTO",
        "GRPO pad x4",
        "pad (1-d tensors)",
    ]
    assert set(collator_rows) == {(name, size) for name in names for size in (4, 8)}
    assert all(ratio > 0 for ratio in collator_rows.values())
    assert "labels + truncate" in out
    for strategy in trl_suite.PACK_STRATEGIES:
        assert any(line.split()[:1] == [strategy] for line in out.splitlines()), strategy
    whole = [line for line in out.splitlines() if line.startswith("bfd, whole_dataset")]
    assert len(whole) == 1 and whole[0].split()[-2].endswith("%")

    data = json.loads(figures.read_text())
    assert data["environment"]["build_profile"] == "release"
    assert data["arguments"]["batch_sizes"] == [4, 8] and data["arguments"]["repeat"] == 1
    sections = [r["section"] for r in data["results"]]
    assert sections.count("collator") == 2 * len(names)
    assert sections.count("preparation") == 1
    assert sections.count("pack_dataset") == len(trl_suite.PACK_STRATEGIES) + 1
    assert all(r["fastcollate_first_call_seconds"] > 0 for r in data["results"][-4:])
    for r in data["results"]:
        if r["trl_seconds"] is not None:
            assert r["speedup_vs_trl"] == pytest.approx(r["trl_seconds"] / r["fastcollate_seconds"])


def test_trl_cases_check_outputs_before_timing():
    pytest.importorskip("trl")
    import torch

    from fastcollate.bench.errors import BenchError
    from fastcollate.bench.trl_suite import _differs

    same = {"input_ids": torch.tensor([[1, 2]]), "max_length_q": 2}
    _differs(dict(same), same, "case")
    for ours in (
        {"input_ids": torch.tensor([[1, 2]], dtype=torch.int32), "max_length_q": 2},
        {"input_ids": torch.tensor([[1, 3]]), "max_length_q": 2},
        {"input_ids": torch.tensor([[1, 2]]), "max_length_q": 3},
        {"max_length_q": 2, "input_ids": torch.tensor([[1, 2]])},
    ):
        with pytest.raises(BenchError, match="case"):
            _differs(ours, same, "case")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--cases", "trl", "--formats", "lists"], "--formats: not with --cases trl"),
        (["--cases", "trl", "--plot", "x.png"], "--plot: not with --cases trl"),
        (["--cases", "trl,WithPadding"], "unknown case(s) trl"),
        (["--sampling", "--cases", "trl"], "--cases: only without --sampling"),
    ],
)
def test_trl_cases_refuse_options_they_do_not_read(args, message, capsys, nothing_runs):
    with pytest.raises(SystemExit) as exit_info:
        entry.main(["bench", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_trl_cases_without_trl_give_the_install_command(monkeypatch, capsys, nothing_runs):
    monkeypatch.setitem(sys.modules, "trl", None)  # makes `import trl` fail
    assert entry.main(["bench", "--cases", "trl", "--quick"]) == 1
    err = capsys.readouterr().err
    assert "--cases trl` needs trl" in err and install_command("trl") in err
