"""`pretokenize`: a sentence-transformers training dataset tokenized once, with the model's own
preprocessing (prompts, truncation, router tasks), unpadded, in the layout the collator pads."""

from __future__ import annotations

from typing import Any

from .layout import BATCH_KEYS, DEFAULT_LABEL_COLUMNS, SEQUENCE_KEYS, pretokenized_columns

# Padding off and Python lists out: each row keeps its own length for the collator to pad.
_UNPADDED = {"text": {"padding": False}, "common": {"return_tensors": None}}


def _prompt_for(prompts: Any, column: str) -> str | None:
    if isinstance(prompts, str):
        return prompts
    if isinstance(prompts, dict):
        return prompts.get(column)
    return None


def _check_flat(name: str, mapping: Any) -> None:
    if isinstance(mapping, dict) and mapping and isinstance(next(iter(mapping.values())), dict):
        raise ValueError(
            f"{name} keyed by dataset name (a nested dict) is for a DatasetDict: pre-tokenize "
            "each dataset with its own inner mapping"
        )


def pretokenize(
    dataset: Any,
    model: Any,
    *,
    prompts: str | dict[str, str] | None = None,
    router_mapping: dict[str, str] | None = None,
    valid_label_columns: list[str] | tuple[str, ...] = DEFAULT_LABEL_COLUMNS,
    batch_size: int = 1000,
    num_proc: int | None = None,
) -> Any:
    """Tokenizes each text column of a `datasets.Dataset` once, as sentence-transformers'
    collator would per batch: the first of `valid_label_columns` found is the label column
    (kept as it is), every other column is text, in order; `prompts` (one string, or one per
    column) and `router_mapping` (column -> task) mean what they mean in
    `SentenceTransformerTrainingArguments`. Each text column `c` becomes `c_input_ids` (and
    the tokenizer's other sequences), unpadded, and `c_modality` / `c_prompt_length` / `c_task`
    where sentence-transformers adds them to a batch; the label column stays last.

    The model's `preprocess` does the tokenizing (with padding off), so truncation, prompts and
    tasks follow the installed sentence-transformers. Text models only: a column of anything
    but strings raises a ValueError naming it.

    A dataset already partly pre-tokenized (a raw text column added afterwards, such as mined
    hard negatives) keeps its pre-tokenized columns as they are, in place, and gets its raw
    text columns tokenized; a fully pre-tokenized one is returned as it is."""
    import datasets

    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(
            f"pretokenize takes a datasets.Dataset, not {type(dataset).__name__} (for a "
            "DatasetDict, pre-tokenize each dataset)"
        )
    _check_flat("prompts", prompts)
    _check_flat("router_mapping", router_mapping)
    columns = list(dataset.column_names)
    label = next((name for name in valid_label_columns if name in columns), None)
    kept = pretokenized_columns(columns)
    texts = [name for name in columns
             if name != label and name != "dataset_name" and name not in kept]
    if not texts:
        return dataset
    for name in texts:
        clashing = [f"{name}_{key}" for key in SEQUENCE_KEYS + BATCH_KEYS
                    if f"{name}_{key}" in columns]
        if clashing:
            raise ValueError(
                f"column '{name}' is raw text, but the dataset already holds {clashing}: "
                "rename the column before pre-tokenizing it"
            )
        feature = dataset.features[name]
        if getattr(feature, "dtype", None) not in ("string", "large_string"):
            raise ValueError(
                f"column '{name}' holds {feature}, not text: pretokenize handles text columns "
                f"(labels go in one of {list(valid_label_columns)})"
            )
    mapping = router_mapping or {}

    def tokenize(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        size = len(batch[texts[0]])
        out: dict[str, list[Any]] = {}
        for name in columns:
            if name in kept or name == "dataset_name":
                out[name] = batch[name]
                continue
            if name not in texts:
                continue
            task = mapping.get(name)
            features = model.preprocess(batch[name], prompt=_prompt_for(prompts, name),
                                        task=task, processing_kwargs=_UNPADDED)
            unknown = [key for key in features if key not in SEQUENCE_KEYS + BATCH_KEYS]
            if unknown:
                raise ValueError(
                    f"the model's preprocessing of column '{name}' returned {unknown}, which "
                    "the pre-tokenized layout does not hold (text models only)"
                )
            for key in SEQUENCE_KEYS:
                if key in features:
                    out[f"{name}_{key}"] = list(features[key])
            for key in BATCH_KEYS:
                if key in features:
                    out[f"{name}_{key}"] = [features[key]] * size
            if task is not None:
                out[f"{name}_task"] = [task] * size
        if label is not None:
            out[label] = batch[label]
        return out

    # datasets would fingerprint `tokenize` by pickling the whole model (seconds); what the
    # result depends on is the data, the tokenizer, the model's length and these options.
    fingerprint = datasets.fingerprint.Hasher.hash((
        dataset._fingerprint, model.tokenizer, getattr(model, "max_seq_length", None),
        prompts, router_mapping, label, texts, kept,
        "fastcollate.sentence_transformers.pretokenize/2",
    ))
    return dataset.map(tokenize, batched=True, batch_size=batch_size, num_proc=num_proc,
                       remove_columns=columns, desc="pre-tokenizing",
                       new_fingerprint=fingerprint)
