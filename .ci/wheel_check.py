"""Checks an installed fastcollate wheel: `python .ci/wheel_check.py VERSION`. Imports it as a
release build of VERSION, pads a batch with numpy alone, and prints what was checked.
Run from outside the source tree, so the installed package is the one imported."""

import sys

import fastcollate

expected_version = sys.argv[1]
assert fastcollate.__version__ == expected_version, fastcollate.__version__
assert fastcollate.build_profile == "release", fastcollate.build_profile
rows = [{"input_ids": [101, 7, 102], "label": 1}, {"input_ids": [101, 102], "label": 0}]
batch = fastcollate.pad(rows, pad_token_id=0, return_tensors="np")
assert batch["input_ids"].tolist() == [[101, 7, 102], [101, 102, 0]], batch
assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]], batch
assert batch["label"].tolist() == [1, 0], batch
print(
    f"ok: Python {sys.version.split()[0]}, fastcollate {fastcollate.__version__} "
    f"({fastcollate.build_profile}) from {fastcollate.__file__}"
)
