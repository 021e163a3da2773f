"""Without the optional dependencies: `import fastcollate` works, and what needs torch or
transformers says which extra installs it instead of failing with a bare traceback."""

from __future__ import annotations

import inspect

import pytest
import transformers

import fastcollate
from fastcollate._internal.extras import install_command
from tests.support.blocked_imports import run_without


def import_error(blocked: list[str], statement: str) -> str:
    """The ImportError `statement` raises without `blocked` ("no error" where none)."""
    done = run_without(
        blocked,
        f"""
        import fastcollate
        try:
            {statement}
        except ImportError as err:
            print(err)
        else:
            print("no error")
        """,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_padding_needs_only_numpy():
    done = run_without(
        ["torch", "transformers"],
        """
        import fastcollate
        batch = fastcollate.pad([{"input_ids": [5, 6]}, {"input_ids": [7]}], pad_token_id=0,
                                return_tensors="np")
        assert batch["input_ids"].tolist() == [[5, 6], [7, 0]]
        assert "torch" not in sys.modules and "transformers" not in sys.modules
        print("ok")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize(
    "blocked, expression, extra",
    [
        (["torch", "transformers"], "fastcollate.Trainer", "transformers"),
        (["transformers"], "fastcollate.Trainer", "transformers"),
        (["torch", "transformers"], "fastcollate.patch_transformers()", "transformers"),
        (["torch"], "fastcollate.LengthGroupedSampler", "torch"),
        (["torch"], "fastcollate.DistributedLengthGroupedSampler", "torch"),
        (["ray"], "fastcollate.RayCollateFn", "ray"),
        (["accelerate"], "fastcollate.prepare", "transformers"),
    ],
)
def test_missing_extras_give_the_install_command(blocked, expression, extra):
    message = import_error(blocked, expression)
    # Until a release is on an index: the command that works from where fastcollate came from.
    assert install_command(extra) in message
    assert "pip install 'fastcollate[" not in message
    assert expression.rstrip("()") in message
    # Sentences, not Python's own text spliced in: which module is missing, then the fix.
    assert f"{blocked[0]} is not installed. Install" in message, message
    assert "No module named" not in message, message


def test_preparation_without_datasets_gives_the_install_command():
    # Its modules import datasets and pyarrow at module level, behind the package's check.
    message = import_error(["datasets"], "import fastcollate.preparation.pack_dataset")
    assert message.startswith("fastcollate.preparation needs datasets and pyarrow"), message
    assert install_command("transformers") in message


def test_bench_without_transformers_prints_the_install_command():
    done = run_without(
        ["transformers"],
        """
        import runpy
        sys.argv = ["fastcollate", "bench", "--quick"]
        runpy.run_module("fastcollate", run_name="__main__")
        """,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert install_command("transformers") in done.stderr


def test_trainer_shows_transformers_signature():
    assert inspect.signature(fastcollate.Trainer) == inspect.signature(transformers.Trainer)
    assert inspect.signature(fastcollate.Trainer.__init__) == inspect.signature(
        transformers.Trainer.__init__
    )
    assert "data_collator" in inspect.signature(fastcollate.Trainer).parameters


def test_every_public_name_has_a_docstring():
    for name in fastcollate.__all__:
        value = getattr(fastcollate, name)
        if isinstance(value, str):
            continue
        assert inspect.getdoc(value), name
        if inspect.isclass(value):
            for attribute, member in vars(value).items():
                if callable(member) and not attribute.startswith("_"):
                    assert inspect.getdoc(member), f"{name}.{attribute}"


def test_pad_documents_the_arguments_transformers_lacks():
    doc = inspect.getdoc(fastcollate.pad)
    for argument in ("tokenizer", "pad_token_id", "pad_token_type_id", "model_input_names"):
        assert f"`{argument}`" in doc


def test_version_needs_neither_torch_nor_transformers():
    done = run_without(
        ["torch", "transformers"],
        """
        import runpy
        sys.argv = ["fastcollate", "--version"]
        runpy.run_module("fastcollate", run_name="__main__")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"fastcollate {fastcollate.__version__} ")


def test_the_tests_that_need_pillow_skip_without_it():
    """Without pillow (only `[dev]` brings it) the processing-class tests that build an image
    processor skip instead of failing."""
    from tests.support.repository import ROOT, child_pythonpath

    done = run_without(
        ["PIL"],
        f"""
        import importlib.util
        import os
        # Libraries ask find_spec whether pillow is there: it answers None, as when it is not.
        find_spec = importlib.util.find_spec
        importlib.util.find_spec = lambda name, package=None: (
            None if name.split(".")[0] == "PIL" else find_spec(name, package))
        os.environ["PYTHONPATH"] = {child_pythonpath()!r}
        sys.path.insert(0, {str(ROOT)!r})
        os.chdir({str(ROOT)!r})
        import pytest
        code = pytest.main(["-q", "-p", "no:cacheprovider",
                            "tests/integrations/test_patch_processing_classes.py"])
        print("exit", int(code))
        """,
    )
    assert done.stdout.strip().splitlines()[-1] == "exit 0", done.stdout[-3000:] + done.stderr
    assert " skipped" in done.stdout


def test_the_install_command_from_a_checkout_names_the_checkout(monkeypatch, tmp_path):
    from fastcollate._internal import extras

    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.setattr(extras, "installed_from", lambda: tmp_path)
    command = extras.install_command("trl")
    assert command.startswith(f"pip install '{tmp_path}[trl]'"), command
    assert "rebuilds the extension" in command and "fastcollate[" not in command


def test_the_install_command_from_a_wheel_names_the_extras_packages(monkeypatch):
    from fastcollate._internal import extras

    monkeypatch.setattr(extras, "installed_from", lambda: None)
    command = extras.install_command("transformers")
    # The packages of the extra, as the installed metadata lists them (a wheel's pip install
    # of fastcollate[...] needs an index holding fastcollate).
    for requirement in ("transformers>=5.0", "datasets>=3.0", "accelerate>=1.0", "torch>=2.1"):
        assert f"'{requirement}'" in command, command
    assert "fastcollate" not in command
    assert extras.install_command("ray").startswith("pip install 'ray[data]>=2.47'")


def test_the_checkout_is_read_from_pips_direct_url_record(monkeypatch, tmp_path):
    import importlib.metadata
    import json

    from fastcollate._internal import extras

    (tmp_path / "pyproject.toml").write_text("")

    class Distribution:
        def __init__(self, record):
            self.record = record

        def read_text(self, name):
            return json.dumps(self.record) if name == "direct_url.json" else None

    for record, expected in [
        ({"url": tmp_path.as_uri(), "dir_info": {}}, tmp_path),
        ({"url": tmp_path.as_uri(), "dir_info": {"editable": True}}, tmp_path),
        ({"url": (tmp_path / "x.whl").as_uri(), "archive_info": {}}, None),
        ({"url": (tmp_path / "gone").as_uri(), "dir_info": {}}, None),
    ]:
        monkeypatch.setattr(importlib.metadata, "distribution", lambda _, r=record: Distribution(r))
        assert extras.installed_from() == expected, record
