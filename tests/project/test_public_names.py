"""The package's public names: `dir(fastcollate)` lists the lazily imported ones before they
are loaded, and transformers' `DataCollatorMixin`, `torch_default_data_collator` and
`numpy_default_data_collator` exist under their names with transformers' behaviour."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import transformers
from transformers.data import data_collator as hf_collators

import fastcollate
from tests.support.compare import assert_same_batch


def test_dir_lists_every_public_name_before_it_is_loaded():
    # A fresh interpreter: nothing lazy has been touched yet.
    code = (
        "import fastcollate, sys\n"
        "names = dir(fastcollate)\n"
        "missing = sorted(set(fastcollate.__all__) - set(names))\n"
        "assert not missing, missing\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
        "assert names == sorted(names)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_dir_holds_the_module_attributes_too():
    names = dir(fastcollate)
    for name in ("__version__", "pad", "__getattr__", "__dir__", "collators"):
        assert name in names
    for name in fastcollate.__all__:
        assert hasattr(fastcollate, name), name


@pytest.mark.parametrize("name", ["DataCollatorMixin", "torch_default_data_collator",
                                  "numpy_default_data_collator"])
def test_transformers_names_exist(name):
    assert name in fastcollate.__all__
    assert getattr(transformers.data.data_collator, name)  # the name transformers has
    assert getattr(fastcollate, name).__doc__


ROWS = [
    {"input_ids": [1, 2, 3], "label": 1, "score": 0.5},
    {"input_ids": [4, 5, 6], "label": 0, "score": 1.5},
]
ARRAY_ROWS = [
    {"input_ids": np.array([1, 2], dtype=np.int32), "label_ids": [1, 2]},
    {"input_ids": np.array([3, 4], dtype=np.int32), "label_ids": [3, 4]},
]
TENSOR_ROWS = [
    {"input_ids": torch.tensor([1, 2]), "label": torch.tensor(1.0)},
    {"input_ids": torch.tensor([3, 4]), "label": torch.tensor(0.0)},
]


@pytest.mark.parametrize("rows", [ROWS, ARRAY_ROWS, TENSOR_ROWS])
def test_default_collator_aliases_match_transformers(rows):
    assert_same_batch(fastcollate.torch_default_data_collator(rows),
                      hf_collators.torch_default_data_collator(rows))
    assert_same_batch(fastcollate.numpy_default_data_collator(rows),
                      hf_collators.numpy_default_data_collator(rows))


def test_default_collator_aliases_take_arrow_batches():
    assert fastcollate.torch_default_data_collator.accepts_arrow_batches is True
    assert fastcollate.numpy_default_data_collator.accepts_arrow_batches is True


def _mixin_collator(base: type) -> type:
    @dataclass
    class Lengths(base):
        """A user's collator written against the mixin: the lengths of the rows."""

        return_tensors: str = "pt"

        def torch_call(self, features):
            return {"lengths": torch.tensor([len(f["input_ids"]) for f in features])}

        def numpy_call(self, features):
            return {"lengths": np.array([len(f["input_ids"]) for f in features])}

    return Lengths


@pytest.mark.parametrize("return_tensors", [None, "pt", "np",
                                            transformers.TensorType.NUMPY])
@pytest.mark.parametrize("default", ["pt", "np"])
def test_mixin_dispatches_as_transformers(default, return_tensors):
    ours = _mixin_collator(fastcollate.DataCollatorMixin)(return_tensors=default)
    theirs = _mixin_collator(hf_collators.DataCollatorMixin)(return_tensors=default)
    assert_same_batch(ours(ROWS, return_tensors), theirs(ROWS, return_tensors))


def test_mixin_refuses_unknown_frameworks_as_transformers():
    ours = _mixin_collator(fastcollate.DataCollatorMixin)(return_tensors="tf")
    theirs = _mixin_collator(hf_collators.DataCollatorMixin)(return_tensors="tf")
    with pytest.raises(ValueError, match="Framework 'tf' not recognized!"):
        theirs(ROWS)
    with pytest.raises(ValueError, match="Framework 'tf' not recognized!"):
        ours(ROWS)
