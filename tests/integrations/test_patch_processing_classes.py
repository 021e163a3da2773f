"""Under `patch_transformers()`, every processing class a transformers collator takes (a
tokenizer, a feature extractor, an image processor, a processor, None) gives what it gives
unpatched: the same batch, or the same exception class."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import transformers
from transformers import (
    ASTFeatureExtractor,
    ViTImageProcessor,
    Wav2Vec2CTCTokenizer,
    Wav2Vec2FeatureExtractor,
    Wav2Vec2Processor,
    WhisperFeatureExtractor,
)

import fastcollate
from tests.support.compare import assert_same_batch


# transformers' image processors (ViTImageProcessor, one of the processing classes here) need
# pillow; `[dev]` installs it, a bare environment skips these tests instead of failing them.
def _has_pillow() -> bool:
    try:
        import PIL  # noqa: F401
    except ImportError:
        return False
    return True


needs_pillow = pytest.mark.skipif(not _has_pillow(),
                                  reason="ViTImageProcessor needs pillow (pip install pillow)")

pytestmark = pytest.mark.parity


def test_the_issues_repro_pads_two_clips_under_the_patch():
    extractor = Wav2Vec2FeatureExtractor()
    rows = [{"input_values": np.ones(n, np.float32)} for n in (3, 5)]
    expected = transformers.DataCollatorWithPadding(extractor)(copy.deepcopy(rows))
    with fastcollate.patch_transformers():
        collator = transformers.DataCollatorWithPadding(extractor)
        assert isinstance(collator, fastcollate.DataCollatorWithPadding)
        assert_same_batch(collator(rows), expected)
    assert_same_batch(fastcollate.DataCollatorWithPadding(extractor)(rows), expected)


def _ctc_tokenizer(tmp_path):
    path = tmp_path / "vocab.json"
    path.write_text(json.dumps({"[PAD]": 0, "[UNK]": 1, "|": 2, "a": 3, "b": 4}))
    return Wav2Vec2CTCTokenizer(str(path), unk_token="[UNK]", pad_token="[PAD]",
                                word_delimiter_token="|")


def _audio_rows(name="input_values", shape=None, label=True):
    rng = np.random.default_rng(0)
    rows = []
    for i, n in enumerate((4, 7, 2)):
        value = rng.standard_normal(shape or n).astype(np.float32)
        row = {name: value}
        if label:
            row["label"] = i
        rows.append(row)
    return rows


def _processing_classes(tmp_path, bert_tokenizer):
    """(name, processing class, rows): one of each kind a collator is given."""
    tokenizer_rows = [{"input_ids": bert_tokenizer(text)["input_ids"], "label": i}
                      for i, text in enumerate(["a b c", "hello", "a longer sentence here"])]
    ctc = _ctc_tokenizer(tmp_path)
    audio = Wav2Vec2FeatureExtractor(return_attention_mask=True)
    return [
        ("tokenizer", bert_tokenizer, tokenizer_rows),
        ("ctc tokenizer", ctc, [{"input_ids": [3, 4, 3]}, {"input_ids": [4]}]),
        ("wav2vec2 feature extractor", Wav2Vec2FeatureExtractor(), _audio_rows()),
        ("wav2vec2 extractor with mask", audio, _audio_rows()),
        ("whisper feature extractor", WhisperFeatureExtractor(feature_size=80),
         _audio_rows("input_features", (80, 3000))),
        ("ast feature extractor (own pad)", ASTFeatureExtractor(), _audio_rows()),
        ("wav2vec2 processor", Wav2Vec2Processor(feature_extractor=audio, tokenizer=ctc),
         _audio_rows()),
        ("image processor", ViTImageProcessor(),
         [{"pixel_values": np.ones((3, 4, 4), np.float32), "label": i} for i in range(2)]),
        ("none", None, [{"input_ids": [1, 2]}, {"input_ids": [3]}]),
    ]


def _outcome(make_collator, rows):
    try:
        return make_collator()(copy.deepcopy(rows))
    except Exception as err:  # noqa: BLE001 - the exception class is what is compared
        return err


COLLATORS = [
    ("DataCollatorWithPadding", {}),
    ("DataCollatorWithPadding", {"pad_to_multiple_of": 4, "return_tensors": "np"}),
    ("DataCollatorForTokenClassification", {}),
    ("DataCollatorForSeq2Seq", {}),
    ("DataCollatorForMultipleChoice", {}),
]


@needs_pillow
@pytest.mark.parametrize(("collator_name", "options"), COLLATORS)
def test_every_processing_class_gives_what_it_gives_unpatched(tmp_path, bert_tokenizer,
                                                              collator_name, options):
    for name, processing_class, rows in _processing_classes(tmp_path, bert_tokenizer):
        unpatched = _outcome(
            lambda cls=processing_class: getattr(transformers, collator_name)(cls, **options),
            rows)
        with fastcollate.patch_transformers():
            patched_class = getattr(transformers, collator_name)
            assert patched_class is getattr(fastcollate, collator_name)
            patched = _outcome(
                lambda make=patched_class, cls=processing_class: make(cls, **options), rows)
        if isinstance(unpatched, Exception):
            assert isinstance(patched, Exception), f"{name}: transformers raised {unpatched!r}"
            if name not in ("tokenizer", "ctc tokenizer", "none"):
                # Handed back to transformers: its own exception. (fastcollate's token
                # padding raises its own ValueError / TypeError naming the key and row, and
                # pads without a tokenizer where it can.)
                assert type(patched) is type(unpatched), f"{name}: {patched!r} / {unpatched!r}"
            continue
        assert not isinstance(patched, Exception), f"{name}: {patched!r}"
        assert_same_batch(patched, unpatched)


@needs_pillow
def test_the_trainer_builds_fastcollate_padding_for_an_extractor_and_hands_back_the_rest():
    from transformers import trainer as trainer_module

    with fastcollate.patch_transformers():
        build = trainer_module.DataCollatorWithPadding
        assert isinstance(build(Wav2Vec2FeatureExtractor()), fastcollate.DataCollatorWithPadding)
        handed_back = build(ViTImageProcessor())
        assert not isinstance(handed_back, fastcollate.DataCollatorWithPadding)


@needs_pillow
def test_collators_given_a_feature_extractor_take_lists_of_rows_not_arrow_batches():
    extractor = Wav2Vec2FeatureExtractor()
    assert not fastcollate.DataCollatorWithPadding(extractor).accepts_arrow_batches
    assert not fastcollate.DataCollatorForSeq2Seq(extractor).accepts_arrow_batches
    assert not fastcollate.DataCollatorForTokenClassification(
        ViTImageProcessor()).accepts_arrow_batches
