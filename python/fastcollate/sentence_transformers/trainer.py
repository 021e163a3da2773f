"""sentence-transformers' trainer on pre-tokenized data: the datasets it is given are
tokenized once (`pretokenize`) and its batches padded by `SentenceTransformerDataCollator`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import sentence_transformers

from .._internal.worker_handover import hands_over
from .collator import SentenceTransformerDataCollator
from .layout import text_columns
from .pretokenize import pretokenize


@dataclass
class _TrainerDataCollator(SentenceTransformerDataCollator):
    """The trainer's collator: pre-tokenized rows padded by `SentenceTransformerDataCollator`,
    rows of raw text (a `DatasetDict`'s or an `IterableDataset`'s, which the trainer does not
    pre-tokenize) handed to sentence-transformers' own collator, built as its trainer builds
    it."""

    raw_text_collator: Any = None

    @hands_over
    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        if features and self.raw_text_collator is not None and not text_columns(
            list(features[0].keys())
        ):
            return cast(dict[str, Any], self.raw_text_collator(features))
        return super().__call__(features)


class PreTokenizedTrainerMixin:
    """For `SentenceTransformerTrainer` and its subclasses (`class X(PreTokenizedTrainerMixin,
    SomeSentenceTransformerTrainer)`): keeps their signature (arguments pass through as they
    are), tokenizes each `datasets.Dataset` it trains or evaluates on once, with the trainer's
    `prompts` and `router_mapping` (the raw text columns of one already partly pre-tokenized,
    such as mined hard negatives added afterwards, too), and pads the batches with
    `SentenceTransformerDataCollator`. A collator passed as `data_collator` is kept. A
    `DatasetDict` or an `IterableDataset` is not pre-tokenized: its batches of raw text go
    through sentence-transformers' own collator, as they would in its trainer."""

    def get_data_collator(self, model: Any, args: Any, processing_class: Any = None) -> Any:
        upstream = super().get_data_collator(  # type: ignore[misc]
            model, args, processing_class
        )
        return _TrainerDataCollator(
            tokenizer=model.tokenizer,
            valid_label_columns=list(upstream.valid_label_columns),
            raw_text_collator=upstream,
        )

    def preprocess_dataset(self, dataset: Any = None, dataset_name: str | None = None) -> Any:
        import datasets

        collator = self.data_collator  # type: ignore[attr-defined]
        if isinstance(dataset, datasets.Dataset) and isinstance(
            collator, SentenceTransformerDataCollator
        ):
            args = self.args  # type: ignore[attr-defined]
            # A fully pre-tokenized dataset comes back as it is.
            dataset = pretokenize(
                dataset,
                self.model,  # type: ignore[attr-defined]
                prompts=args.prompts or None,
                router_mapping=args.router_mapping or None,
                valid_label_columns=collator.valid_label_columns,
            )
        return super().preprocess_dataset(dataset, dataset_name)  # type: ignore[misc]


class SentenceTransformerTrainer(PreTokenizedTrainerMixin,
                                 sentence_transformers.SentenceTransformerTrainer):
    """`sentence_transformers.SentenceTransformerTrainer` with the same arguments, on
    pre-tokenized datasets (see `PreTokenizedTrainerMixin`)."""
