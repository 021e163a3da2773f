"""What differs between the transformers releases the tests run against (5.24 on CPython 3.11+,
5.20 on 3.10: .ci/constraints.txt), where fastcollate follows the newer one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import transformers
from packaging.version import Version

# transformers 5.24 leaves rows with empty input_ids out of a flattened batch (labels and all);
# 5.20 packs them into a batch whose labels and input_ids disagree. fastcollate does as 5.24.
LEAVES_OUT_EMPTY_ROWS = Version(transformers.__version__) >= Version("5.24")


def flattening_as_5_24(call: Callable[[list], Any]) -> Callable[[list], Any]:
    """transformers' DataCollatorWithFlattening `call` as 5.24 and later make it: on an older
    release the rows with empty input_ids are left out before the call."""
    if LEAVES_OUT_EMPTY_ROWS:
        return call
    return lambda rows: call([row for row in rows if len(row["input_ids"])])
