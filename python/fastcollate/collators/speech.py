"""The speech collators users copy from transformers' examples and the Hugging Face audio
course, on the Rust core: `DataCollatorCTCWithPadding` (Wav2Vec2 / HuBERT / WavLM CTC) and
`DataCollatorSpeechSeq2SeqWithPadding` (Whisper and other speech encoder-decoders)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._internal.tensors import torch_module
from .._internal.worker_handover import hands_over
from .feature_extraction import pad_features
from .tokenizer_pad import pad

LABEL_PAD_VALUE = -100


def _check_processor(processor: Any, collator: str) -> None:
    """A processor instance that holds a feature extractor and a tokenizer (what these
    collators pad with), checked when the collator is made: anything else (a model name, a
    number, a tokenizer alone) fails there with a TypeError, not at the first batch."""
    if isinstance(processor, type) or not (
        hasattr(processor, "feature_extractor") and hasattr(processor, "tokenizer")
    ):
        hint = (f"; load it with transformers.AutoProcessor.from_pretrained({processor!r})"
                if isinstance(processor, str) else "")
        raise TypeError(
            f"{collator}'s processor must be a processor instance with a feature_extractor and "
            f"a tokenizer (a Wav2Vec2Processor, a WhisperProcessor, ...), not a "
            f"{type(processor).__name__}{hint}"
        )


def _padded_labels(label_rows: list[Any], tokenizer: Any, padding: Any,
                   pad_to_multiple_of: int | None) -> Any:
    """`labels` padded by the tokenizer ("pt"), then -100 wherever its attention mask is not 1:
    what the examples do with `tokenizer.pad(...)` and `masked_fill`."""
    labels = pad(label_rows, tokenizer, padding=padding, pad_to_multiple_of=pad_to_multiple_of,
                 return_tensors="pt")
    return labels["input_ids"].masked_fill(labels["attention_mask"].ne(1), LABEL_PAD_VALUE)


@dataclass
class DataCollatorCTCWithPadding:
    """The CTC collator of transformers' speech-recognition example (and the audio course):
    `input_values` (or `feature_extractor_input_name`) padded by the processor's feature
    extractor, `labels` padded by its tokenizer with -100, as "pt" tensors; an attention mask,
    when the extractor returns one, as int64.

    Same fields and output as the example's class, which pads with `processor.pad(...)`
    (forwarding to `feature_extractor.pad` and `tokenizer.pad`)."""

    processor: Any
    padding: bool | str = "longest"
    pad_to_multiple_of: int | None = None
    pad_to_multiple_of_labels: int | None = None
    feature_extractor_input_name: str = "input_values"

    def __post_init__(self) -> None:
        _check_processor(self.processor, "DataCollatorCTCWithPadding")

    @hands_over
    def __call__(self, features: list[dict[str, Any]]) -> Any:
        name = self.feature_extractor_input_name
        input_rows = [{name: feature[name]} for feature in features]
        label_rows = [{"input_ids": feature["labels"]} for feature in features]
        batch = pad_features(input_rows, self.processor.feature_extractor, padding=self.padding,
                             pad_to_multiple_of=self.pad_to_multiple_of, return_tensors="pt")
        batch["labels"] = _padded_labels(label_rows, self.processor.tokenizer, self.padding,
                                         self.pad_to_multiple_of_labels)
        if "attention_mask" in batch:
            batch["attention_mask"] = batch["attention_mask"].to(torch_module().long)
        return batch


@dataclass
class DataCollatorSpeechSeq2SeqWithPadding:
    """The speech seq2seq collator of transformers' example (and the audio course's Whisper
    fine-tuning): the model's main input (`processor.model_input_names[0]`, `input_features`
    for Whisper) padded by the feature extractor, `labels` padded by the tokenizer with -100,
    and a leading `decoder_start_token_id` removed when every row starts with it (the model
    prepends it again). With `forward_attention_mask`, the rows' `attention_mask` is stacked
    as int64, as the example does. "pt" tensors, as there."""

    processor: Any
    decoder_start_token_id: int
    forward_attention_mask: bool = False

    def __post_init__(self) -> None:
        _check_processor(self.processor, "DataCollatorSpeechSeq2SeqWithPadding")

    @hands_over
    def __call__(self, features: list[dict[str, Any]]) -> Any:
        torch = torch_module()
        name = self.processor.model_input_names[0]
        input_rows = [{name: feature[name]} for feature in features]
        label_rows = [{"input_ids": feature["labels"]} for feature in features]
        batch = pad_features(input_rows, self.processor.feature_extractor, return_tensors="pt")
        if self.forward_attention_mask:
            batch["attention_mask"] = torch.LongTensor(
                [feature["attention_mask"] for feature in features])
        labels = _padded_labels(label_rows, self.processor.tokenizer, True, None)
        if bool((labels[:, 0] == self.decoder_start_token_id).all()):
            labels = labels[:, 1:]
        batch["labels"] = labels
        return batch
