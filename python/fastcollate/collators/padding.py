"""`DataCollatorWithPadding`, the drop-in for transformers' collator of the same name, on the
Rust core: a call whose options and tokenizer state were settled by an earlier call (`_CallPlan`)
goes straight to one native call; any other goes through `pad()`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from .. import _native
from .._internal.main_input import usual_main_input_kind
from .._internal.tensors import (
    batch_encoding,
    batch_encoding_parts,
    check_pin_memory,
    check_return_tensors,
    floats_as_float32,
    pin_tensors,
    torch_module,
)
from .._internal.worker_handover import hands_over
from ..arrow import ArrowBatch
from .feature_extraction import feature_extractor_of, pad_features, processing_kind
from .native import collate_plan
from .padding_options import (
    PadSettings,
    check_padding_options,
    check_tokenizer,
    max_length_warning,
    padding_group,
    warn_if_max_length_ignored,
)
from .tokenizer_pad import converted_like_tokenizer_pad, pad
from .tokenizer_state import STATE_NAMES, StateKey, keyed_settings, state_key

# The keys transformers' DataCollatorWithPadding renames to `labels`, in the order it renames
# them (a row holding both ends with `label_ids`' values): the one statement of the rule, which
# the native call plan is given too.
LABEL_RENAMES: tuple[tuple[str, str], ...] = (("label", "labels"), ("label_ids", "labels"))


class _Fields(NamedTuple):
    """A `DataCollatorWithPadding`'s fields, the objects a `_CallPlan` was settled from."""

    tokenizer: Any
    padding: Any
    max_length: Any
    pad_to_multiple_of: Any
    return_tensors: str
    pin_memory: Any


class _CallPlan:
    """What a `DataCollatorWithPadding` call settles before padding, kept for the next call:
    valid while the collator's fields are the same objects, the tokenizer's state key
    (`tokenizer_state.state_key`: the objects transformers stores the pad token, padding side
    and the rest in) compares equal and, under "pt", torch's default dtype is the same. Those
    checks, and the rows' kind, are made in one native call (`_native.PlannedCall`)."""

    __slots__ = ("fields", "main", "native_plans", "call")

    def __init__(self, fields: _Fields, tokenizer_key: StateKey,
                 settings: PadSettings, group: _native.PadGroup, return_tensors: str) -> None:
        self.fields = fields
        self.main = settings.main_input
        # `_native.collate`'s groups and options for each kind of main input (None: Python
        # lists), as `pad` passes them, parsed once; under "pt" the native call builds the
        # tensors.
        # The native call also finishes a batch of arrays / tensors alone (labels renamed, a
        # BatchEncoding made), as `DataCollatorWithPadding.__call__` would.
        # Under "pt", Python floats become torch's default dtype: the plan holds for the
        # default dtype it was made under.
        default_dtype = None
        if return_tensors == "pt":
            get_default_dtype = torch_module().get_default_dtype
            default_dtype = (get_default_dtype, get_default_dtype())
        common: dict[str, Any] = {
            "float32": floats_as_float32(return_tensors),
            "keep_numpy_scalars": True,
        }
        encoding = batch_encoding_parts()
        if encoding is not None:
            common["batch_encoding"], common["batch_encoding_attributes"] = encoding
            common["renames"] = LABEL_RENAMES
        if return_tensors == "pt":
            common["to_tensor"] = torch_module().from_numpy
        self.native_plans = {
            kind: collate_plan([group], **common, keep_arrays=kind is None)
            for kind in (None, "np", "pt")
        }
        self.call = _native.PlannedCall(
            list(fields._asdict().items()), tokenizer_key, STATE_NAMES,
            default_dtype=default_dtype, main=self.main,
            plans=tuple(self.native_plans[kind] for kind in (None, "np", "pt")),
            max_length_warning=max_length_warning(fields.padding, fields.max_length),
        )


@dataclass
class DataCollatorWithPadding:
    """Same fields and output as `transformers.DataCollatorWithPadding`: pads with the
    tokenizer's settings, then renames `label` / `label_ids` to `labels`.

    One field transformers does not have: `pin_memory=True` returns the batch in page-locked
    host memory (see `pad`). It needs CUDA and `return_tensors="pt"`, checked here at
    construction, and `num_workers=0` in the DataLoader (a worker's batch reaches the main
    process through shared memory, unpinned): a call in a worker raises."""

    tokenizer: Any
    padding: bool | str = True
    max_length: int | None = None
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"
    pin_memory: bool = False

    # The settled options of the last call (see `_CallPlan`), set per instance; not a field:
    # declared by a type comment, which (unlike an annotation) makes no dataclass field, for
    # mypy as at runtime.
    _call_plan = None  # type: _CallPlan | None

    def __post_init__(self) -> None:
        # Bad options raise here, by the rules each call applies (in its order), not at the
        # first batch.
        check_tokenizer(self.tokenizer, "DataCollatorWithPadding")
        return_tensors = check_return_tensors(self.return_tensors)
        check_padding_options(self.padding, self.max_length, self.pad_to_multiple_of)
        check_pin_memory(self.pin_memory, return_tensors)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_call_plan", None)  # rebuilt on the first call wherever it is unpickled
        return state

    @property
    def accepts_arrow_batches(self) -> bool:
        """True unless a subclass replaces `__call__` (it may expect a list of rows) or the
        processing class is not a tokenizer (a feature extractor pads a list of rows)."""
        return (type(self).__call__ is DataCollatorWithPadding.__call__
                and processing_kind(self.tokenizer) is None)

    @hands_over
    def __call__(self, features: list[dict[str, Any]] | ArrowBatch) -> Any:
        plan = self._call_plan
        if plan is not None:
            if type(features) is list:
                # The usual rows (token ids as a list of ints, a numpy array or a torch
                # tensor, an attention mask of at most one dimension) under the same fields
                # and tokenizer state: one native call.
                batch = plan.call.rows(self, features)
                if batch is not None:
                    return batch if type(batch) is not dict else self._finished(batch, features,
                                                                                plan)
            elif type(features) is ArrowBatch and plan.call.holds(self):
                return self._planned_arrow_call(features, plan)
        return self._unplanned_call(features)

    def _finished(self, batch: dict[str, Any], features: list[Any], plan: _CallPlan) -> Any:
        """A planned call's batch that came back as a dict (some key left as a list): its
        lists converted as tokenizer.pad converts them, labels renamed, a BatchEncoding."""
        if list in map(type, batch.values()):
            main_kind = usual_main_input_kind(features[0].get(plan.main))
            batch = converted_like_tokenizer_pad(batch, main_kind, main_kind is None,
                                                 plan.fields.return_tensors)
        return batch_encoding(renamed_labels(batch))

    def _planned_arrow_call(self, features: ArrowBatch, plan: _CallPlan) -> Any:
        """The planned call for rows still in Arrow storage: what `pad` does with an
        ArrowBatch (the main input required, then one native call with the settled groups),
        the outputs made tensors and the batch finished natively."""
        fields = plan.fields
        if fields.max_length is not None:
            warn_if_max_length_ignored(fields.padding, fields.max_length)
        # Arrow rows hold Python numbers: the plan for a Python main input (whose arrays /
        # scalars options have nothing to keep here).
        batch = features.require(plan.main).collate_planned(plan.native_plans[None])
        if type(batch) is not dict:
            return batch
        if list in map(type, batch.values()):
            batch = converted_like_tokenizer_pad(batch, None, False, fields.return_tensors)
        return batch_encoding(renamed_labels(batch))

    def _unplanned_call(self, features: Any) -> Any:
        """A call without a plan: through `pad` (or the processing class's own padding), the
        plan for the next calls settled after it."""
        tokenizer = self.tokenizer
        if tokenizer is not None and (kind := processing_kind(tokenizer)) is not None:
            return self._call_with_processing_class(features, kind)
        check_tokenizer(tokenizer, "DataCollatorWithPadding")
        batch = pad(
            features,
            tokenizer,
            padding=self.padding,
            max_length=self.max_length,
            pad_to_multiple_of=self.pad_to_multiple_of,
            return_tensors=self.return_tensors,
            pin_memory=self.pin_memory,
        )
        self._plan_next_call()
        return renamed_labels(batch)

    def _call_with_processing_class(self, features: Any, kind: str) -> Any:
        """A feature extractor's padding (natively; a processor that forwards to one the
        same), or, for another transformers processing class, transformers' own collator."""
        if kind == "feature_extractor":
            batch = pad_features(features, feature_extractor_of(self.tokenizer),
                                 padding=self.padding, max_length=self.max_length,
                                 pad_to_multiple_of=self.pad_to_multiple_of,
                                 return_tensors=self.return_tensors)
            if self.pin_memory:
                pin_tensors(batch)
            return renamed_labels(batch)
        from .._internal.patching import original

        if self.pin_memory:
            raise ValueError(f"pin_memory=True is not taken with a "
                             f"{type(self.tokenizer).__name__}: transformers' collator pads it")
        transformers_collator = original("transformers.data.data_collator",
                                         "DataCollatorWithPadding")
        return transformers_collator(self.tokenizer, padding=self.padding,
                                     max_length=self.max_length,
                                     pad_to_multiple_of=self.pad_to_multiple_of,
                                     return_tensors=self.return_tensors)(features)

    def _plan_next_call(self) -> None:
        """Settles the options for the calls to come, after a call that succeeded with them:
        only with plain "pt" / "np" output, no pinning, and a tokenizer with a state key."""
        return_tensors = self.return_tensors
        if type(return_tensors) is not str or return_tensors not in ("pt", "np"):
            return
        if self.pin_memory is not False:
            return
        tokenizer = self.tokenizer
        key = state_key(tokenizer)
        if key is None:
            return
        settings = PadSettings.resolve(tokenizer)
        group = padding_group(settings, self.padding, self.max_length, self.pad_to_multiple_of,
                              None)
        # Settled only when the settings are the key's snapshot: a change made meanwhile (by
        # another thread) would pair the old key with the new settings.
        if not settings.agrees_with(keyed_settings(key)):
            return
        fields = _Fields(tokenizer, self.padding, self.max_length, self.pad_to_multiple_of,
                         return_tensors, self.pin_memory)
        self._call_plan = _CallPlan(fields, key, settings, group, return_tensors)


def renamed_labels(batch: Any) -> Any:
    """`batch` (a dict or a BatchEncoding) with its keys renamed by `LABEL_RENAMES`, in place,
    as transformers' collator renames them."""
    # Renamed in the underlying dict: a BatchEncoding's Python-level item methods cost more
    # than the rest of a small batch's Python work.
    data = batch if type(batch) is dict else batch.data
    for old, new in LABEL_RENAMES:
        if old in data:
            data[new] = data.pop(old)
    return batch
