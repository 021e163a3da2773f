"""Type stub for the Rust extension module (rust/py)."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, final

import numpy as np

__all__ = [
    "ArrowColumn",
    "CollatePlan",
    "PadFloor",
    "PadGroup",
    "PlannedCall",
    "WorkerArena",
    "__version__",
    "build_profile",
    "check_output_size",
    "collate",
    "collate_arrow",
    "collate_arrow_planned",
    "collate_planned",
    "compare_exchange",
    "flatten_batch",
    "group_by_length",
    "group_stream_buffer",
    "has_state_key",
    "mapped_arenas",
    "mask_tokens",
    "pack_dataset_bfd",
    "pack_dataset_fullest",
    "pack_dataset_gather",
    "pack_dataset_gather_chunks",
    "pack_dataset_wrapped",
    "pack_epoch",
    "pack_stream_buffer",
    "pad_frames",
    "pad_id_inputs",
    "pad_prompt_completion",
    "pad_sequences",
    "pad_with_labels",
    "rebalance_epoch",
    "receive_arena_view",
    "sweep_arenas",
    "usual_main_input_kind",
]
__version__: str
build_profile: str  # "release" or "debug"

# One pad group, built once where a collator's settings are worked out and read by every call.
@final
class PadGroup:
    def __new__(
        cls,
        lead: str,  # its lengths set the target
        *,
        pad_value: int,
        strategy: str = "longest",  # "longest" | "max_length" | "do_not_pad"
        max_length: int | None = None,  # needed by "max_length"
        pad_to_multiple_of: int | None = None,
        left: bool = False,  # pad on the left
        # (follower key, pad value, whether each row must be exactly as long as the lead's)
        followers: Sequence[tuple[str, int, bool]] = ...,
        attention_mask: str | None = None,  # its key; created when absent
        integer_lead: bool = False,  # the lead holds token ids: a float is an error
    ) -> PadGroup: ...
    # The same group with one more follower.
    def with_follower(self, key: str, pad_value: int, same_length_as_lead: bool) -> PadGroup: ...
    @property
    def lead(self) -> str: ...
    @property
    def pad_value(self) -> int: ...
    @property
    def strategy(self) -> str: ...
    @property
    def max_length(self) -> int | None: ...
    @property
    def pad_to_multiple_of(self) -> int | None: ...
    @property
    def left(self) -> bool: ...
    @property
    def followers(self) -> list[tuple[str, int, bool]]: ...
    @property
    def attention_mask(self) -> str | None: ...
    @property
    def integer_lead(self) -> bool: ...
    def __getnewargs_ex__(self) -> tuple[tuple[str], dict[str, Any]]: ...

def collate(
    features: Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Any]],
    groups: Sequence[PadGroup],
    *,
    float32: bool,
    allow_ragged: bool = False,
    dtypes: Mapping[str, str] | None = None,
    keys: Sequence[str] | None = None,
    # Also leave keys outside the pad groups and `dtypes` that hold a numpy or torch value as
    # lists.
    keep_arrays: bool = False,
    # Also leave keys outside the pad groups and `dtypes` that hold a numpy scalar other than
    # an np.int64 as lists (tokenizer.pad keeps their dtype).
    keep_numpy_scalars: bool = False,
    # Applied to every numeric output array (e.g. torch.from_numpy); lists are left as they are.
    to_tensor: Callable[[np.ndarray], Any] | None = None,
    # (key, shape, dtype name) -> an empty torch.Tensor of that shape and dtype on the CPU,
    # C-contiguous, made by torch: each output that is not ragged is written into it and
    # returned as it. Not called where torch has no DLPack exchange table.
    output_buffer: Callable[[str, tuple[int, ...], str], Any] | None = None,
) -> dict[str, Any]: ...

# `collate`'s groups and options parsed once (allow_ragged=False, no dtypes, no keys).
@final
class CollatePlan:
    def __new__(
        cls,
        groups: Sequence[PadGroup],
        *,
        float32: bool,
        keep_arrays: bool = False,
        keep_numpy_scalars: bool = False,
        to_tensor: Callable[[np.ndarray], Any] | None = None,
        # transformers' BatchEncoding: a batch without lists comes back finished in one,
        # made without __init__: `data` set, then `batch_encoding_attributes` (what an empty
        # one holds besides `data`), after `renames` ((old key, new key), in order).
        batch_encoding: type | None = None,
        batch_encoding_attributes: Mapping[str, Any] | None = None,
        renames: Sequence[tuple[str, str]] | None = None,
    ) -> CollatePlan: ...

# `collate(rows, groups, **options)` with the groups and options of `plan`.
# A batch without lists, with the plan's batch_encoding: keys renamed, in a BatchEncoding.
def collate_planned(
    rows: Sequence[Mapping[str, Any]], plan: CollatePlan
) -> Any: ...

# A DataCollatorWithPadding call plan's checks and collate plans, in one call per batch
# (`python/fastcollate/collators/padding.py`, `_CallPlan`). `fields` are (name, object) pairs the
# collator must still hold (by identity), the tokenizer first; `tokenizer_key` and
# `state_names` what `has_state_key` compares; `default_dtype` (torch.get_default_dtype, the
# dtype it gave) or None; `plans` the collate plans for list, numpy and torch main inputs;
# `max_length_warning` the UserWarning message each served call gives, or None.
@final
class PlannedCall:
    def __new__(
        cls,
        fields: Sequence[tuple[str, Any]],
        tokenizer_key: tuple[Any, ...],
        state_names: tuple[str, str, str, tuple[str, ...]],
        *,
        default_dtype: tuple[Callable[[], Any], Any] | None,
        main: str,
        plans: tuple[CollatePlan, CollatePlan, CollatePlan],
        max_length_warning: str | None,
    ) -> PlannedCall: ...
    # Whether the plan holds for a call of `collator` (fields, tokenizer state, default dtype).
    def holds(self, collator: Any) -> bool: ...
    # The batch `collator(features)` gives, where the plan holds and `features` are a list of
    # dicts whose first has a usual main input and a mask of at most one dimension; else None,
    # with nothing read.
    def rows(self, collator: Any, features: Any) -> Any | None: ...

# The kind of row 0's main input in the usual batches: None (a list starting with an int),
# "np" (a numpy array), "pt" (a torch tensor), or "unusual" (settled from the other rows).
def usual_main_input_kind(value: Any) -> str | None: ...

# tokenizer_state.has_state_key's comparison: whether `state_key(tokenizer) == key`, reading
# the instance dict by `names` (special tokens map, backend, pad token type id, the names
# that must not be set on the instance). KeyError, AttributeError, TypeError: False.
def has_state_key(
    tokenizer: Any, key: tuple[Any, ...], names: tuple[str, str, str, tuple[str, ...]]
) -> bool: ...

# (pad_text, pad_id, unk_text, unk_id) of a special tokens map and backend tokenizer: the
# backend's id for the pad token's text, and the unknown token's where that is None.
def pad_id_inputs(special: Any, backend: Any) -> tuple[Any, Any, Any, Any]: ...

# The benchmark's floor (fastcollate.bench.floor), nothing else: `keys` (each padded right
# with its pad value to the batch's longest row) and the label (rows' key, output key) read
# into int64 buffers of max_rows x max_length values allocated here and reused by every call.
@final
class PadFloor:
    def __new__(
        cls,
        keys: Sequence[str],
        pad_values: Sequence[int],
        label: tuple[str, str] | None,
        max_rows: int,
        max_length: int,
    ) -> PadFloor: ...
    # Each value an exact list of exact ints or a 1-d int64 numpy array.
    def pad(self, rows: list[dict[str, Any]]) -> None: ...
    # `pad`, then the outputs handed out as `plan` hands out a planned call's batch (fresh
    # buffers, tensors or arrays, finished as its BatchEncoding): a call's floor with outputs.
    def pad_handed_out(self, rows: list[dict[str, Any]], plan: CollatePlan) -> Any: ...
    # The last call's outputs, copied: each key (rows, longest), the label (rows,).
    def outputs(self) -> dict[str, np.ndarray]: ...

# The one sizing rule (rust/core/sizes.rs), asked before Python makes an array whose size it
# computed from options: MemoryError past this machine's memory, ValueError past the address
# space.
def check_output_size(key: str, shape: Sequence[int], itemsize: int, dtype: str) -> None: ...
def group_by_length(
    lengths: np.ndarray,  # int64, one per row
    permutation: np.ndarray,  # int64, a permutation of range(len(lengths))
    batch_size: int,
    mega_batch_mult: int | None = None,
) -> np.ndarray: ...  # int64 grouped indices

def mask_tokens(
    input_ids: np.ndarray,  # int64, (rows, columns), C-contiguous, writeable: masked in place
    *,
    seed: int,  # 0 <= seed < 2**64; with worker and batch, keys the random stream
    worker: int,
    batch: int,
    mlm_probability: float,
    mask_replace_prob: float,
    random_replace_prob: float,
    mask_token_id: int,
    vocab_size: int,  # random replacements are uniform over range(vocab_size)
    special_ids: np.ndarray,  # int64, sorted: never selected (unless special_tokens_mask given)
    special_tokens_mask: np.ndarray | None = None,  # int64, (rows, columns); nonzero: special
    offset_mapping: np.ndarray | None = None,  # int64, (rows, columns, 2): whole-word masking
) -> np.ndarray: ...  # int64 labels, (rows, columns): the original id where selected, else -100

def compare_exchange(
    cells: np.ndarray,  # int64, C-contiguous, writeable (shared between processes)
    index: int,
    current: int,
    new: int,
) -> int: ...  # the value cells[index] held: equal to current exactly when new was stored

def pad_prompt_completion(
    features: Sequence[Mapping[str, Any]],
    prompt_key: str | None,  # None: every prompt empty
    completion_keys: Sequence[str],
    *,
    together: bool,  # one padded set for all completion keys (rows in key order), else one each
    pad_id: int,
    multiple: int | None,
    max_length: int | None,  # each joined sequence cut to this many tokens
    keep_end: bool,  # keep the last max_length tokens, not the first
    completion_mask: bool = True,  # False: the third matrix is None (not written)
    # (key, "float32" | "bool"): one more item each after the matrices, that column as a 1-d
    # array, or None where a row is not an exact dict holding an exact float / bool there
    scalars: Sequence[tuple[str, str]] | None = None,
) -> list[Any]: ...  # (int64 matrices) tuples, the scalar columns, then read_strictly (a bool)

def pad_frames(
    key: str,
    rows: list[np.ndarray],  # C-contiguous float32 / float64, `ndim` dimensions each
    *,
    ndim: int,  # 1: raw audio; 2: frames x features
    strategy: str,  # "longest", "max_length" or "do_not_pad"
    max_length: int | None,
    pad_to_multiple_of: int | None,
    truncation: bool,
    left: bool,
    padding_value: float,
    attention_mask: bool,
    masks: list[np.ndarray] | None = None,  # the rows' own 1-d int32 / int64 masks
) -> tuple[np.ndarray, np.ndarray | None]: ...  # float32 values; the mask when asked for

def pad_sequences(
    sequences: Sequence[Sequence[int]],
    *,
    pad_id: int,
    multiple: int | None,
    left: bool,
) -> tuple[np.ndarray, np.ndarray]: ...  # int64 ids and mask; a bad row is an error

def pad_with_labels(
    features: Sequence[Mapping[str, Any]],
    *,
    pad_id: int,
    multiple: int | None,  # the width rounded up to this
    position_ids: bool,  # also "position_ids" (restarting at each of pre-packed rows' sequences)
    to_tensor: Callable[[np.ndarray], Any],  # applied to every strict-route int64 matrix
) -> tuple[dict[str, Any], bool]: ...  # (input_ids, labels, [position_ids], attention_mask;
# whether the strict route read the rows: exact dicts of non-empty exact lists/tuples of ints).
# Any other batch is read by the lax route in the same call (its matrices left numpy); a bad
# value names its key and row.

def flatten_batch(
    features: Sequence[Mapping[str, Any]],
    *,
    labels: bool,  # read each row's "labels" (else labels come from input_ids)
    separator_id: int,
    position_ids_start: int,
    position_ids: bool,
    seq_idx: bool,
    cu_seq_lens: bool,
    integers_only: bool = False,  # a float or all-bool row is a TypeError naming it (TRL)
    skip_empty: bool = False,  # empty rows add no sequence instead of raising (TRL)
    drop_empty: bool = False,  # empty rows are left out, labels and all (transformers 5.24)
    seq_lengths: bool = False,  # rows hold the sequences their "seq_lengths" give (pre-packed)
    labels_from_ids: bool = False,  # labels: whether any row has them; a row without, its ids
) -> dict[str, Any]: ...  # input_ids, labels, [position_ids], [seq_idx], [cu_seq_lens,
# max_length], read_strictly (the rows read straight, all lists/tuples of ints: int64 is theirs)

# One Arrow array of a column: (rows, offsets (int32/int64, rows + 1) or None for one value per
# row, values type ("int8".."uint64", "float16" as uint16 bits, "float32", "float64", "bool" as a
# uint8 bitmap), values, number of values, bit offset of boolean values, (validity bitmap, bit
# offset) or None, the same for the values). Arrays must be read-only views of Arrow buffers.
_ArrowChunk: TypeAlias = tuple[
    int,
    np.ndarray | None,
    str,
    np.ndarray,
    int,
    int,
    tuple[np.ndarray, int] | None,
    tuple[np.ndarray, int] | None,
]

@final
class ArrowColumn:
    def __new__(cls, key: str, chunks: Sequence[_ArrowChunk]) -> ArrowColumn: ...
    @property
    def key(self) -> str: ...
    @property
    def rows(self) -> int: ...

def collate_arrow(
    columns: Sequence[ArrowColumn],
    index_map: ArrowColumn | None,  # datasets' indices mapping (one integer per row)
    indices: Sequence[int],  # dataset positions; negative ones count from the end
    groups: Sequence[PadGroup],
    *,
    float32: bool,
    allow_ragged: bool = False,
    dtypes: Mapping[str, str] | None = None,
    keys: Sequence[str] | None = None,
    # As `collate`'s: outputs written into the tensors it gives (returned in their place).
    output_buffer: Callable[[str, tuple[int, ...], str], Any] | None = None,
) -> dict[str, np.ndarray | list[Any]]: ...

# `collate_arrow` for the plan's groups and `float32`, each output through its `to_tensor`,
# and finished as `collate_planned` finishes a batch (with its `batch_encoding`).
def collate_arrow_planned(
    columns: Sequence[ArrowColumn],
    index_map: ArrowColumn | None,
    indices: Sequence[int],
    plan: CollatePlan,
) -> Any: ...

# transformers' BatchRebalanceSampler epoch for `order` (its torch.randperm): (indices,
# offsets) of `rank`'s micro-batches, or every rank's (rank-major per step) when rank is None.
def rebalance_epoch(
    lengths: np.ndarray,
    order: np.ndarray,
    effective_batch_size: int,
    dp_size: int,
    grad_accum: int,
    drop_last: bool,
    rank: int | None = None,
) -> tuple[np.ndarray, np.ndarray]: ...

# One stream buffer packed best-fit decreasing: (indices, offsets) of the batches to emit, in
# buffer positions, and the positions carried into the next buffer.
def pack_stream_buffer(
    lengths: np.ndarray,
    max_tokens: int,
    *,
    truncate: bool,
    last: bool,
    seed: int,
    epoch: int,
    buffer_number: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

# One stream buffer sorted by length and cut into batches of batch_size rows: (indices,
# offsets) of the batches to emit, in buffer positions (a short batch, only when last, comes
# last), and the positions carried into the next buffer.
def group_stream_buffer(
    lengths: np.ndarray,
    batch_size: int,
    *,
    last: bool,
    seed: int,
    epoch: int,
    buffer_number: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

# One epoch of batches of at most max_tokens tokens, rank's share: (indices, offsets).
def pack_epoch(
    lengths: np.ndarray,
    max_tokens: int,
    *,
    window: int,
    shuffle: bool,
    seed: int,
    epoch: int,
    truncate: bool,
    num_replicas: int,
    rank: int,
    drop_last: bool,
) -> tuple[np.ndarray, np.ndarray]: ...

# TRL's best-fit decreasing per batch bounds[b]..bounds[b + 1]: (piece starts in the flattened
# values, piece lengths, pieces per packed row as offsets, values per packed row as offsets).
def pack_dataset_bfd(
    lengths: np.ndarray, bounds: np.ndarray, seq_length: int, *, split: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...

# whole_dataset=True: all rows, each packed row filled with the longest remaining piece that
# fits until none does; the same four arrays as pack_dataset_bfd.
def pack_dataset_fullest(
    lengths: np.ndarray, seq_length: int, *, split: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...

# TRL's "wrapped": the packed rows' offsets into the flattened values.
def pack_dataset_wrapped(
    lengths: np.ndarray, bounds: np.ndarray, seq_length: int
) -> np.ndarray: ...

# The pieces' fixed-width values (uint8 bytes, width each) in order; with values=None, their
# indices into the flattened values (int64) for an Arrow take.
def pack_dataset_gather(
    starts: np.ndarray, lengths: np.ndarray, values: np.ndarray | None = None, width: int = 1
) -> np.ndarray: ...

# The pieces' fixed-width values (uint8 bytes, width each) in order, read from consecutive
# chunks of values (each piece inside one chunk) without concatenating them.
def pack_dataset_gather_chunks(
    starts: np.ndarray, lengths: np.ndarray, chunks: list[np.ndarray], width: int
) -> np.ndarray: ...

# Shared-memory arenas for DataLoader workers (Linux only; absent elsewhere). The worker's
# arena: `slots` slots of `slot_bytes` bytes (a multiple of 64) in one anonymous shared file.
@final
class WorkerArena:
    def __new__(cls, slots: int, slot_bytes: int) -> WorkerArena: ...
    @property
    def slots(self) -> int: ...
    @property
    def slot_bytes(self) -> int: ...
    # The file's (device, inode), which names the arena in both processes.
    @property
    def identity(self) -> tuple[int, int]: ...
    def fileno(self) -> int: ...
    # A free slot of at least nbytes bytes, held until `release`; None when none is.
    def claim(self, nbytes: int) -> int | None: ...
    def release(self, slot: int) -> None: ...
    # The bytes as a writable array (numpy's type number and C-ordered shape, or uint8 bytes
    # without a type number) that holds the slot while it lives.
    def view(
        self,
        slot: int,
        offset: int,
        nbytes: int,
        typenum: int | None = None,
        shape: Sequence[int] = ...,
    ) -> np.ndarray: ...
    def locate(self, address: int, nbytes: int) -> tuple[int, int] | None: ...
    # True when the main process maps the arena (the view is sent without the file).
    def send(self, slot: int) -> bool: ...
    def retire(self) -> None: ...
    def holds(self, slot: int) -> int: ...

# The main process's side: a view a worker sent, as an array holding its slot (typed as `view`
# is); `fd` (taken and closed) is the arena's file when it came along, else -1.
def receive_arena_view(
    identity: tuple[int, int],
    fd: int,
    owner_pid: int,
    slot: int,
    offset: int,
    nbytes: int,
    typenum: int | None = None,
    shape: Sequence[int] = ...,
) -> np.ndarray: ...
def mapped_arenas() -> int: ...
def sweep_arenas() -> int: ...
