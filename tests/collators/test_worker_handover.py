"""Batches collated in DataLoader workers reach the main process through the worker's shared
arena (one mapping per worker; each tensor a view of it, no segment or descriptor per batch):
the same batches as torch's own hand-over and as without workers, under fork, spawn and
forkserver, with the DataLoader's options; FASTCOLLATE_WORKER_SHARING=0 leaves torch's hand-over;
a slot held in the main process is never written again; nothing leaks when a worker is killed,
a loader deleted or an epoch left early."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import random
import signal
import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

import fastcollate
from fastcollate._internal import worker_arena

# Those that start DataLoader workers (left out of the default run).
multiprocess = pytest.mark.multiprocess
pytestmark = pytest.mark.skipif(not worker_arena.supported(), reason="shared arenas need Linux")

CONTEXTS = [c for c in ("fork", "spawn", "forkserver")
            if c in multiprocessing.get_all_start_methods()]


def token_rows(tokenizer, count=24, seed=0):
    rng = random.Random(seed)
    words = ["film", "plot", "dull", "great", "actor", "scene", "long", "fun", "bad", "good"]
    rows = []
    for i in range(count):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 40)))
        row = dict(tokenizer(text))
        row["labels"] = i % 2
        rows.append(row)
    return rows


def tagged_rows(tokenizer):
    rows = token_rows(tokenizer)
    for row in rows:
        row["labels"] = [i % 5 for i in range(len(row["input_ids"]))]
    return rows


def seq2seq_rows(tokenizer):
    rows = token_rows(tokenizer)
    for i, row in enumerate(rows):
        row["labels"] = list(range(100, 103 + i % 7))
    return rows


def lm_rows(tokenizer):
    return [{"input_ids": row["input_ids"]} for row in token_rows(tokenizer)]


def multiple_choice_rows(tokenizer):
    rows = token_rows(tokenizer)
    return [{"input_ids": [row["input_ids"]] * 3, "attention_mask": [row["attention_mask"]] * 3,
             "label": i % 3} for i, row in enumerate(rows)]


def stacked_rows(tokenizer):
    return [{"input_ids": list(range(i, i + 6)), "label": i % 2, "scores": [0.5 * i, 1.0]}
            for i in range(24)]


def ctc_collator(tokenizer):
    import tempfile
    from pathlib import Path

    from transformers import Wav2Vec2FeatureExtractor, Wav2Vec2Processor

    from tests.support.speech import ctc_tokenizer

    processor = Wav2Vec2Processor(feature_extractor=Wav2Vec2FeatureExtractor(),
                                  tokenizer=ctc_tokenizer(Path(tempfile.mkdtemp())))
    return fastcollate.DataCollatorCTCWithPadding(processor)


def audio_rows(tokenizer):
    import numpy as np

    rng = np.random.default_rng(0)
    return [{"input_values": rng.standard_normal(50 + 7 * i).astype(np.float32),
             "labels": rng.integers(4, 10, size=1 + i % 5).tolist()} for i in range(24)]


def trl_collator(tokenizer):
    pytest.importorskip("trl")
    import fastcollate.trl

    return fastcollate.trl.DataCollatorForLanguageModeling(pad_token_id=tokenizer.pad_token_id)


def sentence_transformers_collator(tokenizer):
    pytest.importorskip("sentence_transformers")
    from fastcollate.sentence_transformers import SentenceTransformerDataCollator

    return SentenceTransformerDataCollator(tokenizer)


def sentence_rows(tokenizer):
    return [{"anchor_input_ids": row["input_ids"], "anchor_attention_mask": row["attention_mask"],
             "label": i % 2} for i, row in enumerate(token_rows(tokenizer))]


CASES = {
    "padding": (lambda t: fastcollate.DataCollatorWithPadding(t), token_rows),
    "default_data_collator": (lambda t: fastcollate.default_data_collator, stacked_rows),
    "DefaultDataCollator": (lambda t: fastcollate.DefaultDataCollator(), stacked_rows),
    "flattening": (lambda t: fastcollate.DataCollatorWithFlattening(), lm_rows),
    "multiple_choice": (lambda t: fastcollate.DataCollatorForMultipleChoice(t),
                        multiple_choice_rows),
    "masked_language_modeling": (
        lambda t: fastcollate.DataCollatorForLanguageModeling(t, seed=3), lm_rows),
    "speech_ctc": (ctc_collator, audio_rows),
    "trl_language_modeling": (trl_collator, lm_rows),
    "sentence_transformers": (sentence_transformers_collator, sentence_rows),
    "token_classification": (lambda t: fastcollate.DataCollatorForTokenClassification(t),
                             tagged_rows),
    "seq2seq": (lambda t: fastcollate.DataCollatorForSeq2Seq(t), seq2seq_rows),
    "language_modeling": (lambda t: fastcollate.DataCollatorForLanguageModeling(t, mlm=False),
                          lm_rows),
}


RANDOM = {"masked_language_modeling"}  # seeded per worker: compared with workers only


def batches(collate, rows, workers, context=None, **options):
    loader = DataLoader(rows, batch_size=5, collate_fn=collate, num_workers=workers,
                        multiprocessing_context=context if workers else None, **options)
    return [dict(batch) for batch in loader]


def torch_handover(monkeypatch, *args, **options):
    """The same batches handed over by torch's own reductions (sharing off)."""
    with monkeypatch.context() as patch:
        patch.setenv("FASTCOLLATE_WORKER_SHARING", "0")
        return batches(*args, **options)


def in_arena(batch):
    """Every tensor of the batch is a view of a worker's arena: torch's hand-over would have
    put it in shared memory of its own (`is_shared`), the arena's views are not."""
    tensors = [value for value in batch.values() if isinstance(value, torch.Tensor)]
    return bool(tensors) and not any(value.is_shared() for value in tensors)


def assert_same_batches(left, right):
    assert len(left) == len(right)
    for a, b in zip(left, right, strict=True):
        assert list(a) == list(b)
        for key in a:
            if not isinstance(a[key], torch.Tensor):
                assert a[key] == b[key], key
                continue
            assert a[key].dtype == b[key].dtype, key
            assert a[key].shape == b[key].shape and a[key].stride() == b[key].stride(), key
            assert torch.equal(a[key], b[key]), key


@multiprocess
@pytest.mark.parametrize("case", list(CASES))
def test_worker_batches_are_torchs_batches_through_the_arena(bert_tokenizer, case, monkeypatch):
    make, rows_of = CASES[case]
    rows = rows_of(bert_tokenizer)
    received = batches(make(bert_tokenizer), rows, 2, "fork")
    assert all(in_arena(batch) for batch in received), case
    handed_over = torch_handover(monkeypatch, make(bert_tokenizer), rows, 2, "fork")
    assert not any(in_arena(batch) for batch in handed_over)
    assert_same_batches(received, handed_over)
    if case not in RANDOM:
        assert_same_batches(received, batches(make(bert_tokenizer), rows, 0))


@multiprocess
@pytest.mark.parametrize("context", [c for c in CONTEXTS if c != "fork"])
@pytest.mark.parametrize("case", ["padding", "masked_language_modeling"])
def test_spawned_workers_hand_over_through_the_arena(bert_tokenizer, case, context, monkeypatch):
    make, rows_of = CASES[case]
    rows = rows_of(bert_tokenizer)
    received = batches(make(bert_tokenizer), rows, 2, context)
    assert all(in_arena(batch) for batch in received)
    assert_same_batches(received,
                        torch_handover(monkeypatch, make(bert_tokenizer), rows, 2, context))


class Rows(IterableDataset):
    """An iterable dataset: each worker yields its share of the rows."""

    def __init__(self, rows):
        self.rows = rows

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(self.rows[start::step])


def set_thread_count(worker_id):
    torch.set_num_threads(1)


@multiprocess
@pytest.mark.parametrize("options", [
    {"prefetch_factor": 4, "timeout": 60},
    {"worker_init_fn": set_thread_count, "persistent_workers": True},
    {"pin_memory": True},
    {"iterable": True},
], ids=["prefetch-timeout", "init-persistent", "pin-memory", "iterable"])
def test_dataloader_options_keep_the_batches(bert_tokenizer, options, monkeypatch):
    rows = token_rows(bert_tokenizer, count=40)
    options = dict(options)
    data = Rows(rows) if options.pop("iterable", False) else rows
    collate = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    received = batches(collate, data, 2, "fork", **options)
    handed_over = torch_handover(monkeypatch, collate, data, 2, "fork", **options)
    assert_same_batches(received, handed_over)
    if not options.get("pin_memory") or torch.cuda.is_available():
        assert all(in_arena(batch) for batch in received)


@multiprocess
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_batches_held_in_the_main_process_are_never_overwritten(bert_tokenizer, context):
    rows = token_rows(bert_tokenizer, count=60)
    collate = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    expected = batches(collate, rows, 0)
    loader = DataLoader(rows, batch_size=5, collate_fn=collate, num_workers=2,
                        multiprocessing_context=context, persistent_workers=True,
                        prefetch_factor=4)
    held = []
    for _ in range(3):  # every batch of three epochs kept: the workers must make room
        epoch = [dict(batch) for batch in loader]
        assert_same_batches(epoch, expected)
        held.append(epoch)
    for epoch in held:
        assert_same_batches(epoch, expected)
    assert worker_arena.mapped_arenas() >= 2
    del loader


def open_descriptors():
    return len(os.listdir("/proc/self/fd"))


def descriptor_targets():
    """What each open descriptor names, for a failing count's message."""
    targets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            targets.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return sorted(targets)


def let_closed_queues_finish(timeout=10.0):
    """A closed multiprocessing queue's write end is closed by its feeder thread when that
    thread ends, after the DataLoader's shutdown has returned: wait for the feeder threads of
    closed queues (those of open ones are left running), so counts are not taken mid-close."""
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread.name == "QueueFeederThread" and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))


def shm_entries():
    """Shared-memory segments named in /dev/shm. Not the `sem.*` entries: those are POSIX
    semaphores the DataLoader's multiprocessing queues make and unlink at once, which a spawn
    worker still starting or stopping may show for a moment."""
    if not os.path.isdir("/dev/shm"):
        return 0
    return sum(1 for name in os.listdir("/dev/shm") if not name.startswith("sem."))


def leftovers(settle=False):
    """What a loader may leave behind here: descriptors, /dev/shm entries, mapped arenas.
    `settle` first waits for the feeder threads of queues a shut-down loader closed."""
    gc.collect()
    if settle:
        let_closed_queues_finish()
    worker_arena.sweep_arenas()
    return open_descriptors(), shm_entries(), worker_arena.mapped_arenas()


@multiprocess
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("persistent", [False, True], ids=["restarted", "persistent"])
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_no_descriptor_segment_or_mapping_left_over_epochs(bert_tokenizer, context, persistent):
    rows = token_rows(bert_tokenizer, count=40)
    before = leftovers()
    loader = DataLoader(rows, batch_size=4, num_workers=2, multiprocessing_context=context,
                        persistent_workers=persistent,
                        collate_fn=fastcollate.DataCollatorWithPadding(bert_tokenizer))
    counts = []
    for _ in range(6):
        epoch = [dict(batch) for batch in loader]
        assert all(in_arena(batch) for batch in epoch)
        del epoch
        counts.append(leftovers())
    # The first epoch opens what the loader keeps (persistent workers' pipes and arenas).
    assert counts[-1] <= counts[1], counts
    del loader
    after = leftovers(settle=True)
    assert after[1:] == before[1:], (before, after)
    # torch may keep its resource sharer's listener
    assert after[0] <= before[0] + 1, (before, after, descriptor_targets())


def worker_pids(iterator):
    return [worker.pid for worker in iterator._workers]


def drain_after_a_kill(iterator, held):
    """Takes the batches the iterator still gives until it reports the killed worker, then
    shuts its workers down (what its `__del__` does, here at once: torch's SIGCHLD handler
    would otherwise raise again later, anywhere)."""
    try:
        for batch in iterator:
            held.append(dict(batch))
    except RuntimeError as error:
        assert "exited unexpectedly" in str(error) or "killed" in str(error)
    else:
        raise AssertionError("the DataLoader did not report its killed worker")
    finally:
        iterator._shutdown_workers()


@multiprocess
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_killed_worker_leaves_held_batches_intact_and_nothing_behind(bert_tokenizer, context):
    rows = token_rows(bert_tokenizer, count=80)
    collate = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    expected = batches(collate, rows, 0)
    before = leftovers()
    loader = DataLoader(rows, batch_size=5, collate_fn=collate, num_workers=2,
                        multiprocessing_context=context)
    iterator = iter(loader)
    held = [dict(next(iterator)) for _ in range(4)]
    os.kill(worker_pids(iterator)[0], signal.SIGKILL)
    drain_after_a_kill(iterator, held)
    assert all(in_arena(batch) for batch in held)
    del iterator, loader
    gc.collect()
    assert_same_batches(held, expected[:len(held)])  # still the workers' values
    assert worker_arena.mapped_arenas() > before[2]
    # Both workers are gone: each arena is unmapped with its last view here.
    del held
    gc.collect()
    assert worker_arena.mapped_arenas() == before[2]
    after = leftovers(settle=True)
    assert after[1:] == before[1:], (before, after)
    # torch may keep its resource sharer's listener
    assert after[0] <= before[0] + 1, (before, after, descriptor_targets())


@multiprocess
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_finished_workers_arena_goes_with_its_last_view(bert_tokenizer):
    rows = token_rows(bert_tokenizer, count=20)
    collate = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    before = leftovers()[2]
    loader = DataLoader(rows, batch_size=5, collate_fn=collate, num_workers=1,
                        multiprocessing_context="fork")
    kept = None
    for batch in loader:  # the worker exits at the epoch's end
        kept = batch["input_ids"]
    del loader, batch
    gc.collect()
    assert worker_arena.mapped_arenas() == before + 1  # the last batch's view keeps it
    del kept  # the last view: unmapped now, without a sweep
    gc.collect()
    assert worker_arena.mapped_arenas() == before


def leave_epochs_early(rows, collate, ending, context):
    """Three loaders, each left after its first batch (`ending`); what is left behind after."""
    before = leftovers()
    for _ in range(3):
        loader = DataLoader(rows, batch_size=5, collate_fn=collate, num_workers=2,
                            multiprocessing_context=context, prefetch_factor=4)
        if ending == "deleted":
            iterator = iter(loader)
            first = batch = next(iterator)
            del iterator, loader
        elif ending == "break":
            for batch in loader:
                first = batch
                break
        else:
            try:
                for batch in loader:
                    first = batch
                    raise ValueError("the training step failed")
            except ValueError:
                pass
        del first, batch
    after = leftovers(settle=True)
    return tuple(a - b for a, b in zip(after, before, strict=True))


@multiprocess
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("ending", ["deleted", "break", "exception"])
def test_an_epoch_left_early_leaves_no_more_than_torchs_hand_over(bert_tokenizer, ending,
                                                                   context, monkeypatch):
    rows = token_rows(bert_tokenizer, count=80)
    collate = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    descriptors, segments, mapped = leave_epochs_early(rows, collate, ending, context)
    assert (segments, mapped) == (0, 0)
    with monkeypatch.context() as patch:
        patch.setenv("FASTCOLLATE_WORKER_SHARING", "0")
        torchs_descriptors, _, _ = leave_epochs_early(rows, collate, ending, context)
    # torch's loader may keep a left iterator's pipes until it is collected: the same here.
    assert descriptors <= max(torchs_descriptors, 1), (descriptors, torchs_descriptors)


@pytest.fixture
def worker_side(monkeypatch):
    """This process playing a worker: its own arenas, torch's reduction restored after."""
    from multiprocessing.reduction import ForkingPickler

    monkeypatch.setattr(worker_arena, "_arenas", [])
    monkeypatch.setitem(ForkingPickler._extra_reducers, torch.Tensor,
                        ForkingPickler._extra_reducers[torch.Tensor])
    return ForkingPickler


def test_a_batch_crosses_as_views_of_the_arena(worker_side):
    batch = {
        "input_ids": torch.arange(15).reshape(3, 5),
        "attention_mask": torch.ones(3, 5, dtype=torch.bool),
        "scores": torch.rand(3, dtype=torch.bfloat16),  # a dtype numpy lacks
        "empty": torch.zeros(0, 4),
        "text": ["a", "b", "c"],
    }
    before = {key: value.clone() if isinstance(value, torch.Tensor) else value
              for key, value in batch.items()}
    worker_arena.place_batch(batch)
    assert batch["empty"] is not None and batch["text"] is before["text"]
    for key in ("input_ids", "attention_mask", "scores"):
        assert batch[key].data_ptr() % 64 == 0
        assert batch[key].dtype == before[key].dtype and torch.equal(batch[key], before[key])
    arena = worker_arena._arenas[-1]
    slot, _ = arena.locate(batch["input_ids"].data_ptr(), 15 * 8)
    assert arena.holds(slot) == 3  # one per view in this process
    sliced = batch["input_ids"][1:, ::2]  # a view a wrapper made: strides and offset kept
    mapped = worker_arena.mapped_arenas()
    first = pickle.loads(worker_side.dumps(dict(batch, sliced=sliced)))  # with the file
    again = pickle.loads(worker_side.dumps(batch))  # mapped here now: without it
    assert worker_arena.mapped_arenas() == mapped + 1
    for received in (first, again):
        for key, value in before.items():
            assert type(received[key]) is type(value)
            if isinstance(value, torch.Tensor):
                assert received[key].dtype == value.dtype and torch.equal(received[key], value)
    assert first["sliced"].stride() == sliced.stride()
    assert first["sliced"].storage_offset() == sliced.storage_offset()
    assert torch.equal(first["sliced"], sliced)
    assert arena.holds(slot) == 3 + 4 + 3  # and one per view sent
    first["input_ids"][0, 0] = -1  # the main process's view writes the same slot
    assert batch["input_ids"][0, 0] == -1
    del first, again, received, batch, sliced
    gc.collect()
    assert arena.holds(slot) == 0
    assert arena.claim(1) is not None


def test_a_full_arena_grows_instead_of_overwriting(worker_side):
    kept = [worker_arena.place_batch({"a": torch.full((1000,), i)}) for i in range(9)]
    assert len(worker_arena._arenas) >= 2
    assert all(torch.equal(batch["a"], torch.full((1000,), i)) for i, batch in enumerate(kept))
    larger = worker_arena.place_batch({"a": torch.ones(1 << 20)})
    assert larger["a"].sum() == 1 << 20
    assert worker_arena._arenas[-1].slot_bytes >= (1 << 20) * 4


@multiprocess
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_sharing_off_leaves_torchs_hand_over(bert_tokenizer, context, monkeypatch):
    rows = token_rows(bert_tokenizer)
    collate = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    received = torch_handover(monkeypatch, collate, rows, 2, context)
    assert_same_batches(received, batches(collate, rows, 0))
    assert all(value.is_shared() for batch in received for value in batch.values())


def test_outside_a_worker_the_output_is_untouched(bert_tokenizer):
    batch = fastcollate.DataCollatorWithPadding(bert_tokenizer)(token_rows(bert_tokenizer)[:4])
    assert not any(value.is_shared() for value in batch.values())
    assert all(value.untyped_storage().nbytes() == value.numel() * 8 for value in batch.values())


@multiprocess
def test_trainer_workers_hand_batches_over_through_the_arena(model_path, bert_tokenizer,
                                                              tmp_path):
    import datasets
    from transformers import AutoModelForSequenceClassification

    texts = [f"sentence {i} " * (1 + i % 4) for i in range(16)]
    train = datasets.Dataset.from_dict({"text": texts, "label": [i % 2 for i in range(16)]})
    train = train.map(lambda batch: bert_tokenizer(batch["text"]), batched=True,
                      remove_columns=["text"])
    args = fastcollate.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4,
                                         report_to=[], dataloader_num_workers=2, use_cpu=True)
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)
    trainer = fastcollate.Trainer(model, args, train_dataset=train,
                                  processing_class=bert_tokenizer)
    received = [dict(batch) for batch in trainer.get_train_dataloader()]
    assert len(received) == 4
    for batch in received:
        assert {"input_ids", "attention_mask", "labels"} <= set(batch)
        assert in_arena(batch)
    trainer.train()  # the loop consumes the views


def test_a_typed_view_must_match_its_bytes_and_alignment():
    import numpy as np

    from fastcollate import _native

    arena = _native.WorkerArena(1, 4096)
    slot = arena.claim(64)
    int64 = np.dtype(np.int64).num
    assert arena.view(slot, 0, 48, int64, (2, 3)).shape == (2, 3)
    assert arena.view(slot, 0, 48, int64, (2, 3, 1, 1)).ndim == 4  # any number of dimensions
    with pytest.raises(ValueError, match="cannot be shaped"):
        arena.view(slot, 0, 48, int64, (2, 2))
    with pytest.raises(ValueError, match="not aligned"):
        arena.view(slot, 4, 48, int64, (2, 3))
    with pytest.raises(ValueError, match="past its slot"):
        arena.view(slot, 4090, 48)
    with pytest.raises(ValueError):
        arena.release(5)
    arena.release(slot)
    assert arena.holds(slot) == 0


def test_a_worker_without_shared_memory_hands_over_as_torch_does(worker_side, monkeypatch):
    from fastcollate import _native

    def no_memory(slots, slot_bytes):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(worker_arena, "_warned", [])
    monkeypatch.setattr(_native, "WorkerArena", no_memory)
    tensor = torch.arange(6)
    with pytest.warns(RuntimeWarning, match="hands its batches over as torch does"):
        batch = worker_arena.place_batch({"input_ids": tensor})
    assert batch["input_ids"] is tensor


@multiprocess
def test_batches_received_in_another_thread_are_freed_in_this_one(bert_tokenizer):
    """As DataLoader(pin_memory=True) does on a GPU: its pinning thread receives (rebuilds)
    the batches, the training loop frees them."""
    import threading

    rows = token_rows(bert_tokenizer, count=40)
    collate = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    before = leftovers()[2]
    received = []
    thread = threading.Thread(target=lambda: received.extend(batches(collate, rows, 2, "fork")))
    thread.start()
    thread.join()
    assert all(in_arena(batch) for batch in received)
    assert_same_batches(received, batches(collate, rows, 0))
    received.clear()
    assert leftovers()[2] == before
