"""A small character vocabulary and the real `Wav2Vec2CTCTokenizer` built from it, for the
speech tests (transformers' CTC examples pad their labels with such a tokenizer)."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import Wav2Vec2CTCTokenizer

VOCAB = {"[PAD]": 0, "[UNK]": 1, "|": 2, "<s>": 3, **{c: i + 4 for i, c in enumerate("abcdefgh")}}


def ctc_tokenizer(folder: Path) -> Wav2Vec2CTCTokenizer:
    """A `Wav2Vec2CTCTokenizer` over `VOCAB`, its vocab.json written into `folder`."""
    path = folder / "vocab.json"
    path.write_text(json.dumps(VOCAB))
    return Wav2Vec2CTCTokenizer(str(path), unk_token="[UNK]", pad_token="[PAD]",
                                word_delimiter_token="|", bos_token="<s>")


def unaligned(array):
    """A copy of `array` that is C-contiguous but not aligned: its values read from raw bytes
    at an odd offset, as `np.frombuffer(raw, np.float32, offset=1)` reads raw PCM."""
    import numpy as np

    raw = b"\0" + np.ascontiguousarray(array).tobytes()
    out = np.frombuffer(raw, array.dtype, offset=1).reshape(array.shape)
    assert out.flags.c_contiguous and (out.size == 0 or not out.flags.aligned)
    return out
