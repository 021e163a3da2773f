"""sentence-transformers' trainer on pre-tokenized data: the datasets it is given are
tokenized once (`pretokenize`) and its batches padded by `SentenceTransformerDataCollator`."""

from __future__ import annotations

from typing import Any

import sentence_transformers

from .collator import SentenceTransformerDataCollator
from .layout import text_columns
from .pretokenize import pretokenize


class PreTokenizedTrainerMixin:
    """For `SentenceTransformerTrainer` and its subclasses (`class X(PreTokenizedTrainerMixin,
    SomeSentenceTransformerTrainer)`): keeps their signature (arguments pass through as they
    are), tokenizes each `datasets.Dataset` it trains or evaluates on once, with the trainer's
    `prompts` and `router_mapping`, and pads the batches with
    `SentenceTransformerDataCollator`. A collator passed as `data_collator` is kept, and a
    DatasetDict or an IterableDataset is left to sentence-transformers' own collator path:
    give the trainer a pre-tokenized Dataset (and this collator) for those."""

    def get_data_collator(self, model: Any, args: Any, processing_class: Any = None) -> Any:
        return SentenceTransformerDataCollator(tokenizer=model.tokenizer)

    def preprocess_dataset(self, dataset: Any = None, dataset_name: str | None = None) -> Any:
        import datasets

        collator = self.data_collator  # type: ignore[attr-defined]
        if (
            isinstance(dataset, datasets.Dataset)
            and isinstance(collator, SentenceTransformerDataCollator)
            and not text_columns(dataset.column_names)
        ):
            args = self.args  # type: ignore[attr-defined]
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
