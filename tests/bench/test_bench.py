"""Smoke tests of `python -m fastcollate bench` (no timings are asserted)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import fastcollate
from fastcollate.bench import cli, report, timing, workload
from fastcollate.bench.errors import BenchError

BENCH = Path(fastcollate.__file__).parent / "bench"


def test_rows_are_imdb_like_and_deterministic():
    rows = workload.classification_rows(np.random.default_rng(0), 64)
    again = workload.classification_rows(np.random.default_rng(0), 64)
    assert rows == again
    for row in rows:
        ids = row["input_ids"]
        assert 4 <= len(ids) <= workload.MAX_TOKENS
        assert ids[0] == workload.CLS_ID and ids[-1] == workload.SEP_ID
        assert all(0 <= i < workload.VOCAB_SIZE for i in ids)
        assert row["attention_mask"] == [1] * len(ids)
        assert row["token_type_ids"] == [0] * len(ids)
        assert row["label"] in (0, 1)


def test_run_checks_and_times_every_format():
    results = timing.run(
        batch_sizes=[3],
        repeat=1,
        min_seconds=0.0,
        cases=["DataCollatorWithPadding"],
        pool_rows=15,
    )
    assert [(r.format, r.batch_size) for r in results] == [(f, 3) for f in workload.FORMATS]
    for r in results:
        assert set(r.seconds) == {"transformers", "pad_sequence", "numpy loop", "fastcollate"}
        assert r.vs_transformers > 0 and r.vs_best_baseline > 0
        # Both bases: fresh batches from a pool of 15 rows' worth, and the cached case.
        assert r.pool_batches == 5
        assert set(r.cached_seconds) == set(r.seconds) and r.cached_vs_transformers > 0
        record = r.as_dict()
        assert record["cached"]["speedup_vs_transformers"] == r.cached_vs_transformers
        # The floor beside fastcollate, on the fresh basis, out of the methods and baselines.
        assert r.floor_seconds > 0 and r.vs_floor > 0 and r.floor_spread is not None
        assert record["floor"]["fastcollate_over_floor"] == r.vs_floor
    table = report.format_table(results)
    assert "WithPadding" in table and "vs transformers" in table
    assert max(len(line) for line in table.splitlines()) <= 100
    floors = report.floor_table(results)
    assert "How far from the limit" in floors and "fastcollate / floor" in floors
    assert max(len(line) for line in floors.splitlines()) <= 100
    assert all(r.checked == "equal" and set(r.spread) == set(r.seconds) for r in results)


def test_the_pool_holds_distinct_batches_and_at_least_the_cached_ones():
    assert timing.pool_size(32) == timing.POOL_ROWS // 32 == 400
    assert timing.pool_size(512) == 25
    assert timing.pool_size(4096) == timing.CACHED_BATCHES


def test_fresh_timing_hands_each_call_a_new_batch_in_turn_from_the_pool():
    pool = [[{"input_ids": [i, i]}] for i in range(3)]
    seen = []

    def collate(batch):
        seen.append(batch)
        return batch

    timing.time_methods_fresh({"m": collate}, pool, repeat=2, min_seconds=0.0, warmup_batches=2)
    # warm-up on the first 2 batches, then each run continues round the pool.
    assert [batch[0]["input_ids"][0] for batch in seen] == [0, 1, 2, 0, 1, 2]
    for batch in seen:
        source = pool[batch[0]["input_ids"][0]]
        assert batch == source and batch is not source and batch[0] is not source[0]
        assert batch[0]["input_ids"] is source[0]["input_ids"]  # values as the dataset gives


def _result(case, spread, checked="equal"):
    seconds = {"transformers": 1e-3, "fastcollate": 1e-5}
    return timing.Result(case, "lists", 8, seconds, dict.fromkeys(seconds, spread), checked)


def test_the_report_says_what_was_checked_and_what_was_not_comparable():
    exact = _result("DataCollatorWithPadding", 0.0)
    partial = _result("DataCollatorForLanguageModeling", 0.0, "the ids before masking")
    assert report.checked_summary([exact]).endswith("(keys, values, shapes, dtypes).")
    summary = report.checked_summary([exact, partial])
    assert "equal: WithPadding" in summary
    assert "not comparable value for value: ForLanguageModeling, where the ids before" in summary


def test_load_and_disagreeing_repeats_are_warned_about():
    quiet = [_result("DataCollatorWithPadding", 0.05)]
    assert report.load_warnings(quiet, load=0.5, cpus=2) == []
    assert report.load_warnings(quiet, load=None, cpus=2) == []
    [busy] = report.load_warnings(quiet, load=3.5, cpus=2)
    assert "load average (3.5) exceeds the 2 CPUs" in busy
    noisy = [_result("DataCollatorWithPadding", report.SPREAD_WARNING + 0.01)] + quiet
    [warning] = report.load_warnings(noisy, load=0.5, cpus=2)
    assert "disagreed by more than 25% in 1 of 2 configurations (WithPadding [lists, batch 8])" in (
        warning.replace("\n  ", " ")
    )


def test_a_variant_gets_its_own_block_within_100_columns():
    r = _result("DataCollatorForLanguageModeling", 0.0)
    r.seconds['fastcollate mask_rng="torch"'] = 1e-4
    table = report.format_table([r])
    assert 'ForLanguageModeling, mask_rng="torch": torch\'s generator draws the masks' in table
    assert max(len(line) for line in table.splitlines()) <= 100


def test_the_command_line_is_recorded_as_typed():
    main = str(BENCH.parent / "__main__.py")
    assert report.command_line([main, "bench", "--quick"]) == "python -m fastcollate bench --quick"
    assert report.command_line(["benches/x.py", "--a", "b c"]) == "python benches/x.py --a 'b c'"


def test_a_debug_build_is_refused(monkeypatch, capsys):
    monkeypatch.setattr(fastcollate, "build_profile", "debug")
    assert cli.bench_main(["--quick"]) == 1
    assert "debug build" in capsys.readouterr().err


def test_a_wrong_output_aborts(monkeypatch):
    class Broken(fastcollate.DataCollatorWithPadding):
        def __call__(self, features):
            batch = super().__call__(features)
            batch["input_ids"][0, 0] += 1
            return batch

    monkeypatch.setattr(fastcollate, "DataCollatorWithPadding", Broken)
    with pytest.raises(BenchError, match="'input_ids' differs"):
        timing.run(
            batch_sizes=[2],
            formats=["lists"],
            repeat=1,
            min_seconds=0.0,
            cases=["DataCollatorWithPadding"],
            pool_rows=2,
        )


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every `from ... import ...` in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            found.append((module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
    return found


def test_bench_modules_import_only_public_names_and_no_cycle():
    modules = {path.stem: path for path in BENCH.glob("*.py") if path.stem != "__init__"}
    depends: dict[str, set[str]] = {}
    for name, path in modules.items():
        depends[name] = set()
        for module, names in _imports(path):
            if module == "." or module.startswith(".") and module[1:] in modules:
                siblings = names if module == "." else [module[1:]]
                depends[name].update(siblings)
                private = [n for n in names if n.startswith("_")]
                assert not private, f"bench/{name}.py imports {private} from {module}"
            elif module.startswith("fastcollate"):
                # Of fastcollate's internals, only the extras helper; `fastcollate.trl` is public
                # (the TRL API, which `fastcollate` does not import: TRL is optional). The floor
                # is a native loop only the benchmark calls: bench/floor.py alone imports it.
                allowed = ("fastcollate", "fastcollate.trl", "fastcollate._internal.extras")
                if name == "floor":
                    allowed += ("fastcollate._native",)
                assert module in allowed, (name, module)
            else:
                assert not module.startswith("."), (name, module)
    # A topological order exists: no module reaches itself.
    done: set[str] = set()
    while len(done) < len(depends):
        ready = [m for m in depends if m not in done and depends[m] <= done]
        assert ready, f"import cycle among {sorted(set(depends) - done)}"
        done.update(ready)


def test_the_old_modules_are_gone():
    package = BENCH.parent
    assert not (package / "_bench.py").exists()
    assert not (package / "_bench_sampling.py").exists()
