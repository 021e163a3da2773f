"""Every published benchmark figure comes from a committed results file: the generated regions
of README.md and docs/ equal what benches/render_figures.py makes from benches/results/, and
no speed-up or timing stands outside those regions."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from tests.support.repository import ROOT

SCRIPT = ROOT / "benches" / "render_figures.py"
# A speed-up ("410×", "1.5x") or a time ("0.9 ms", "12 µs", "4.1 s"); dimensions such as
# "2 × batch" (a space before the sign) are not figures.
FIGURE = re.compile(r"\d(?:×|x\b)|\d\s?(?:ms|µs|ns|s)\b")
FENCE = re.compile(r"^```.*?^```$", re.DOTALL | re.MULTILINE)


def load_script():
    spec = importlib.util.spec_from_file_location("render_figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


render_figures = load_script()


def figures_outside_regions(text: str) -> list[str]:
    text = render_figures.REGION.sub("", text)
    text = FENCE.sub("", text)
    return [
        line.strip()
        for line in text.splitlines()
        if FIGURE.search(line) and not line.lstrip().startswith("<!--")
    ]


@pytest.mark.parametrize("page", render_figures.PAGES, ids=lambda p: p.name)
def test_generated_figures_match_the_results_files(page):
    text = page.read_text("utf-8")
    assert render_figures.render_page(text) == text, (
        f"{page.name}: figures differ from benches/results/; run python benches/render_figures.py"
    )


@pytest.mark.parametrize(
    "page", [p for p in render_figures.PAGES if p.name != "changelog.md"], ids=lambda p: p.name
)
def test_no_figure_outside_a_generated_region(page):
    # docs/changelog.md includes CHANGELOG.md, whose dated entries keep the figures of their time.
    assert figures_outside_regions(page.read_text("utf-8")) == []


def test_the_headline_pages_use_generated_figures():
    for page in ("README.md", "docs/index.md"):
        assert "<!-- figures: headline -->" in (ROOT / page).read_text("utf-8")
    assert "<!-- figures: with-padding -->" in (ROOT / "README.md").read_text("utf-8")


def test_every_results_file_records_its_command_and_environment():
    for name, command in render_figures.RESULTS.items():
        path = render_figures.RESULTS_DIR / name
        if name in render_figures.OPTIONAL and not path.exists():
            continue  # its region says it is pending (test_an_optional_file_not_yet_written...)
        record = json.loads(path.read_text("utf-8"))
        env = record["environment"]
        for key in ("command", "date", "cpu", "python", "numpy", "torch", "transformers"):
            assert env.get(key), f"{name}: no {key}"
        assert env["fastcollate"] and env["build_profile"] == "release", name
        # The command that wrote it is the one the script documents.
        assert env["command"] == command, name


def test_a_changed_number_is_caught():
    page = ROOT / "README.md"
    text = page.read_text("utf-8")
    match = re.search(r"<!-- figures: with-padding -->(.*?)<!-- /figures -->", text, re.DOTALL)
    assert match is not None
    numbers = re.findall(r"\d+(?:\.\d+)?×", match.group(1))
    assert numbers
    tampered = text.replace(numbers[0], "9" + numbers[0], 1)
    assert render_figures.render_page(tampered) != tampered
    assert render_figures.render_page(tampered) == text


def test_a_figure_outside_the_regions_is_caught():
    assert figures_outside_regions("padded 160–410× faster") == ["padded 160–410× faster"]
    assert figures_outside_regions("took 0.05 ms here") == ["took 0.05 ms here"]
    assert figures_outside_regions("| 200,000 | 4.10 s |") == ["| 200,000 | 4.10 s |"]
    assert figures_outside_regions("`rank × num_workers`, 2 × batch rows") == []
    assert figures_outside_regions("a <!-- figures: headline -->1–2×<!-- /figures --> b") == []
    assert figures_outside_regions("```bash\nbench  # 3x faster\n```") == []


def test_an_unknown_region_is_an_error():
    with pytest.raises(KeyError, match="no-such"):
        render_figures.render_page("<!-- figures: no-such --><!-- /figures -->")


def test_the_plots_are_drawn_from_the_results_files_as_they_are():
    assert render_figures.outdated_plots() == [], "run python benches/render_figures.py"
    assert render_figures.PLOT in render_figures.plots()


def test_a_plot_from_other_figures_is_caught(tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    source = render_figures.RESULTS_DIR / "collators.json"
    (results / "collators.json").write_bytes(source.read_bytes())
    monkeypatch.setattr(render_figures, "RESULTS_DIR", results)
    assert render_figures.outdated_plots() == []  # same bytes, same digest
    (results / "collators.json").write_bytes(source.read_bytes() + b" ")
    assert render_figures.outdated_plots() == [render_figures.PLOT]


def _fresh_record() -> dict:
    """with_padding.json as the fresh basis writes it: figures on fresh batches, `cached`
    beside them (made-up values, for the renderer only)."""
    record = json.loads((render_figures.RESULTS_DIR / "with_padding.json").read_text("utf-8"))
    record["settings"]["basis"] = {
        "fresh": {"pool_rows": 12800, "description": "..."},
        "cached": {"batches": 4, "description": "..."},
    }
    for r in record["results"]:
        r["pool_batches"] = 12800 // r["batch_size"]
        r["cached"] = {"ms_per_batch": {}, "speedup_vs_transformers": 1000.0}
        r["speedup_vs_transformers"] = 50.0 + r["batch_size"]
    return record


def test_the_headline_is_the_fresh_basis_and_the_cached_case_is_labelled(monkeypatch):
    record = _fresh_record()
    monkeypatch.setattr(render_figures, "load", lambda name: record)
    assert render_figures.headline() == "82.0×"  # batch 32, every format alike
    table = render_figures.with_padding_table()
    assert "cached (same batches reused), batch 32" in table
    assert "1000×" in table  # the cached figure, in its labelled column only
    assert "each call gets a batch built just before it" in table
    assert "its fixed cost included" in table
    old = json.loads((render_figures.RESULTS_DIR / "with_padding.json").read_text("utf-8"))
    if "basis" not in old["settings"]:  # a file written before the fresh basis: labelled
        monkeypatch.setattr(render_figures, "load", lambda name: old)
        assert render_figures.headline().endswith("(cached: the same batches reused)")


def test_an_optional_file_not_yet_written_renders_as_pending(tmp_path, monkeypatch):
    monkeypatch.setattr(render_figures, "RESULTS_DIR", tmp_path)
    speech = render_figures.speech_table()
    assert "Pending" in speech and render_figures.RESULTS["speech.json"] in speech
    gpu = render_figures.gpu_table()
    assert "Pending" in gpu and "python3 benches/gpu_run.py" in gpu
    assert render_figures.plots().keys() == {render_figures.PLOT}


def test_a_cpu_record_is_not_published_as_gpu_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(render_figures, "RESULTS_DIR", tmp_path)
    (tmp_path / "gpu_cpu.json").write_text(
        json.dumps({"device": {"type": "cpu"}, "settings": {"tiny": True}, "results": []})
    )
    with pytest.raises(ValueError, match="not a GPU run"):
        render_figures.gpu_table()


def test_speech_figures_are_summarised_from_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(render_figures, "RESULTS_DIR", tmp_path)
    rows = []
    for mask, theirs in ((False, 2.5), (True, 15.0)):
        rows.append({"batch_size": 8, "attention_mask": mask, "samples": 250000,
                     "transformers_ms": theirs, "numpy_loop_ms": 1.1, "fastcollate_ms": 1.0,
                     "copy_ms": 0.8, "speedup": theirs, "vs_numpy_loop": 1.1,
                     "over_copy": 1.25})  # fmt: skip
    environment = json.loads(
        (ROOT / "benches" / "results" / "with_padding.json").read_text("utf-8")
    )["environment"]
    record = {"environment": environment, "arguments": {"repeat": 7}, "results": rows}
    (tmp_path / "speech.json").write_text(json.dumps(record))
    text = render_figures.speech_table()
    assert "about as fast as the numpy loop (its time over ours: 1.1×)" in text
    assert "2.5× faster than `fe.pad` without attention masks, 15.0× with them" in text
    assert "where `fe.pad` slows down" in text


def test_a_gpu_record_renders_its_table_line_and_plot(tmp_path, monkeypatch):
    # Made-up values in a temporary folder, for the renderer only.
    monkeypatch.setattr(render_figures, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(render_figures, "PLOT", tmp_path / "img" / "speedup.png")
    (tmp_path / "img").mkdir()
    source = ROOT / "benches" / "results" / "collators.json"
    (tmp_path / "collators.json").write_bytes(source.read_bytes())
    results = []
    runs = (
        ("trainer/bert/transformers-padded/w0", 8.0, 0.25),
        ("fastcollate-trainer/bert/fastcollate-padded/w0", 10.0, 0.01),
        ("fastcollate-trainer/lm/fastcollate-packed/w0", 2.0, 0.0),
    )
    for name, steps, wait in runs:
        loop, task, rest, _ = name.split("/")
        results.append({"name": name, "loop": loop, "task": task, "status": "ok",
                        "layout": "packed" if "packed" in rest else "padded",
                        "steps_per_s": steps, "tokens_per_s": steps * 1000,
                        "data_wait_share": wait, "padding_share": 0.0})  # fmt: skip
    environment = json.loads(
        (ROOT / "benches" / "results" / "with_padding.json").read_text("utf-8")
    )["environment"]
    record = {
        "device": {"type": "cuda", "name": "NVIDIA H200", "memory_gib": 140, "cuda": "13.0"},
        "environment": {**environment, "accelerate": "1.15.0"},
        "settings": {"tiny": False, "batch_size": 32, "steps": 60, "warmup": 10,
                     "packed_tokens_per_row": 256},  # fmt: skip
        "tests": {"summary": "20 passed"},
        "results": results,
    }
    (tmp_path / "gpu_nvidia_h200.json").write_text(json.dumps(record))
    line = render_figures.gpu_line()
    assert "NVIDIA H200" in line and "10.00 steps/s" in line and "8.00 in" in line
    table = render_figures.gpu_table()
    assert "| BERT-base | `fastcollate.Trainer`" in table and "| 1.2× |" in table
    assert "20 passed" in table and "img/gpu_nvidia_h200.png" in table
    plot = tmp_path / "img" / "gpu_nvidia_h200.png"
    assert plot in render_figures.outdated_plots()
    render_figures.plots()[plot][1]()
    assert plot not in render_figures.outdated_plots()


def test_the_floor_table_gives_each_format_and_batch_size_its_ratio(monkeypatch):
    # with_padding.json with made-up floor figures, for the renderer only.
    record = _fresh_record()
    record["settings"]["basis"]["floor"] = {"description": "a loop (made up)"}
    for r in record["results"]:
        r["floor"] = {"ms_per_batch": 0.02, "fastcollate_over_floor": 1.25, "spread": 0.0}
    record["results"][0]["floor"] = None  # no floor measured: no line
    torch_row = next(i for i, r in enumerate(record["results"][1:], 1) if r["format"] == "torch")
    record["settings"]["basis"]["torch_floor"] = {"description": "a loop through torch (made up)"}
    record["results"][torch_row]["torch_floor"] = {
        "ms_per_batch": 0.04, "fastcollate_over_floor": 0.5, "spread": 0.0
    }  # fmt: skip
    monkeypatch.setattr(render_figures, "load", lambda name: record)
    table = render_figures.floor_table()
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    assert lines[0] == (
        "| rows | batch | fastcollate | floor | fastcollate / floor | floor through torch "
        "| fastcollate / that |"
    )
    assert len(lines) == 1 + len(record["results"]) - 1
    through_torch = [line for line in lines[1:] if line.endswith("| 40.0 µs | 0.50× |")]
    assert len(through_torch) == 1 and through_torch[0].startswith("| torch tensors |")
    others = [line for line in lines[1:] if line not in through_torch]
    assert all(line.endswith("| 20.0 µs | 1.25× | - | - |") for line in others)
    assert "The floor is a loop (made up)." in table
    assert "the floor through torch is a loop through torch (made up)." in table
    assert "<!-- figures: floor -->" in (ROOT / "docs" / "benchmarks.md").read_text("utf-8")
