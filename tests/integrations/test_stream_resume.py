"""Exact resume on streams: `fastcollate.Trainer` stopped right after a checkpoint inside epoch 0
and inside epoch 1, then resumed from it, trains the batches the uninterrupted run trains from
there, one for one, and ends with the same weights (packed, length-grouped and plain streams);
`PackedStream` / `LengthGroupedStream` `state_dict()` / `load_state_dict()` resume a reader at
its batch; and seeded MLM masks on a stream differ between the Trainer's epochs and repeat for
the same (seed, epoch)."""

from __future__ import annotations

import re

import datasets
import pytest
import torch
import transformers

import fastcollate
from tests.support.resume_runs import Recording, StopAfterSave
from tests.support.tiny_models import counting_rows, tiny_config, tiny_llama_config, tiny_model

ROWS = 40
BUDGET = 64
BATCH = 4


def stream_of(sequences):
    return datasets.Dataset.from_dict({"input_ids": sequences}).to_iterable_dataset(num_shards=2)


def small_stream(kind):
    """A packed or length-grouped stream over 60 counted rows, seeded."""
    source = stream_of(counting_rows(60))
    if kind == "packed":
        return fastcollate.PackedStream(source, BUDGET, buffer=8, seed=2)
    return fastcollate.LengthGroupedStream(source, BATCH, buffer=8, seed=2)


def epoch_lengths(kind, sequences, seed):
    """How many batches the Trainer's stream yields in epochs 0 and 1."""
    lengths = []
    for epoch in range(2):
        if kind == "packed":
            stream = fastcollate.PackedStream(stream_of(sequences), BUDGET, seed=seed)
        elif kind == "grouped":
            stream = fastcollate.LengthGroupedStream(stream_of(sequences), BATCH, buffer=16,
                                                     seed=seed)
        else:
            return [-(-ROWS // BATCH)] * 2
        stream.set_epoch(epoch)
        lengths.append(len(list(stream)))
    return lengths


def run(kind, tmp_path, tokenizer, max_steps, stop_at=None, resume=None):
    strategy = {"packed": "packed", "grouped": "group_by_length", "plain": "random"}[kind]
    options = {"packed": {"max_tokens_per_batch": BUDGET},
               "grouped": {"group_by_length_buffer": 16}}.get(kind, {})
    args = fastcollate.TrainingArguments(
        output_dir=str(tmp_path), train_sampling_strategy=strategy,
        per_device_train_batch_size=BATCH, max_steps=max_steps,
        learning_rate=1e-2, seed=3, report_to="none", use_cpu=True, save_strategy="no",
        disable_tqdm=True, **options)
    collator = None if kind == "packed" else fastcollate.DataCollatorForLanguageModeling(
        tokenizer, mlm=False)
    trainer = Recording(model=tiny_model(seed=1), args=args, data_collator=collator,
                        train_dataset=stream_of(counting_rows(ROWS)),
                        callbacks=[StopAfterSave(stop_at)] if stop_at else None)
    trainer.seen = []
    trainer.train(resume_from_checkpoint=resume)
    return trainer


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["packed", "grouped", "plain"])
def test_resume_inside_epoch_0_and_a_later_epoch(tmp_path, bert_tokenizer, kind):
    first, second = epoch_lengths(kind, counting_rows(ROWS), seed=3)
    max_steps = first + second + 3  # into epoch 2
    full = run(kind, tmp_path / "full", bert_tokenizer, max_steps)
    assert len(full.seen) == max_steps
    for stop in (first // 2, first + second // 2):  # inside epoch 0, inside epoch 1
        out = tmp_path / f"stop{stop}"
        stopped = run(kind, out, bert_tokenizer, max_steps, stop_at=stop)
        assert stopped.seen == full.seen[:stop]
        resumed = run(kind, out, bert_tokenizer, max_steps,
                      resume=str(out / f"checkpoint-{stop}"))
        assert resumed.seen == full.seen[stop:], f"resumed at step {stop}"
        for (name, ours), theirs in zip(resumed.model.state_dict().items(),
                                        full.model.state_dict().values(), strict=True):
            assert torch.equal(ours, theirs), name


@pytest.mark.parametrize("kind", ["packed", "grouped"])
@pytest.mark.parametrize("workers", [0, 2])
def test_stream_state_dict_resumes_a_reader(kind, workers):
    stream = small_stream(kind)
    stream.set_epoch(1)
    whole = list(stream)
    identity = stream.state_dict()["stream"]
    assert stream.state_dict() == {"epoch": 1, "batches": len(whole), "complete": True,
                                    "reader": [0, 1], "stream": identity}
    stream.set_epoch(1)
    iterator = iter(stream)
    head = [next(iterator) for _ in range(3)]
    state = stream.state_dict()
    assert state == {"epoch": 1, "batches": 3, "complete": False,
                     "reader": [0, 1], "stream": identity} and head == whole[:3]
    again = small_stream(kind)
    again.load_state_dict(state)
    assert again.epoch == 1
    assert list(again) == whole[3:]
    assert list(again) == whole  # the next iteration is the whole epoch again
    # Saved by another reader (rank x workers): its batches differ, so it cannot resume there.
    other = small_stream(kind)
    other.load_state_dict({**state, "reader": [1, 2]})
    with pytest.raises(ValueError, match=r"saved by reader 1 of 2 .*this is reader 0 of 1"):
        list(other)
    # A complete place: the pass it resumes has nothing left; the next pass is whole.
    done = small_stream(kind)
    done.set_epoch(1)
    done.load_state_dict({"epoch": 1, "batches": len(whole), "complete": True,
                          "reader": [0, 1], "stream": identity})
    assert list(done) == [] and done.state_dict()["complete"]
    assert list(done) == whole


@pytest.mark.parametrize("kind", ["packed", "grouped"])
def test_a_place_at_an_epochs_end_does_not_replay_it(kind):
    """Saved after epoch 1's last batch, loaded into a fresh stream: the loop's set_epoch(1)
    pass yields nothing, and the next batch is epoch 2's first."""
    stream = small_stream(kind)
    stream.set_epoch(1)
    assert list(stream)
    state = stream.state_dict()
    assert state["complete"] and state["epoch"] == 1
    stream.set_epoch(2)
    following = list(stream)
    for moves in ([1, 2], [2]):  # the loop goes on in the saved epoch, or at the next one
        resumed = small_stream(kind)
        resumed.load_state_dict(state)
        batches = []
        for epoch in moves:
            resumed.set_epoch(epoch)
            batches.extend(resumed)
        assert batches == following, moves


@pytest.mark.parametrize(("state", "field"), [
    ({"epoch": 1, "batches": 2, "complete": "no", "reader": [0, 1]}, "'complete'"),
    ({"epoch": 1, "batches": 2, "complete": False, "reader": 5}, "'reader'"),
    ({"epoch": 1, "batches": 2, "complete": False, "reader": [3, 2]}, "'reader'"),
    ({"epoch": 1, "batches": 2, "complete": False, "reader": [0, True]}, "'reader'"),
    ({"epoch": "1", "batches": 2, "complete": False, "reader": None}, "'epoch'"),
    ({"epoch": 2**63, "batches": 2, "complete": False, "reader": None}, "'epoch'"),
    ({"epoch": 2**63, "batches": 2, "complete": True, "reader": None}, "'epoch'"),
    ({"epoch": 2**64 + 1, "batches": 2, "complete": False, "reader": None}, "'epoch'"),
    ({"epoch": 1, "batches": -1, "complete": False, "reader": None}, "'batches'"),
    ({"epoch": 1, "batches": 2.0, "complete": False, "reader": None}, "'batches'"),
    ({"epoch": 1, "batches": 2, "complete": False, "stream": None}, "has no 'reader'"),
    ({"epoch": 1}, "has no 'batches', 'complete', 'reader'"),
    ({"epoch": 1, "batches": 2, "complete": False, "reader": None, "extra": 1}, "'extra'"),
    ({"epoch": 1, "batches": 2, "complete": False, "reader": None, "stream": 7}, "'stream'"),
    ([1, 2], "not list"),
])
def test_malformed_places_are_refused(state, field):
    for stream in (fastcollate.PackedStream(stream_of(counting_rows(8)), BUDGET),
                   fastcollate.LengthGroupedStream(stream_of(counting_rows(8)), BATCH)):
        if isinstance(state, dict) and "stream" not in state and len(state) == 4:
            state = {**state, "stream": stream.state_dict()["stream"]}
        with pytest.raises(ValueError, match=re.escape(field)):
            stream.load_state_dict(state)
        assert stream.state_dict() == {"epoch": 0, "batches": 0, "complete": False,
                                       "reader": None, "stream": stream.state_dict()["stream"]}


def every_stream(**options):
    """One stream of each class over 60 counted rows, with `options` changed."""
    source = stream_of(counting_rows(60))
    shared = {"buffer": 8, "seed": 2,
              **{k: v for k, v in options.items() if k not in ("max_tokens", "truncate",
                                                                "batch_size")}}
    packed = {k: v for k, v in options.items() if k == "truncate"}
    return [fastcollate.PackedStream(source, options.get("max_tokens", BUDGET), **shared,
                                     **packed),
            fastcollate.LengthGroupedStream(source, options.get("batch_size", BATCH),
                                            **shared)]


@pytest.mark.parametrize(("changed", "named"), [
    ({"seed": 3}, "seed=2 where this stream has seed=3"),
    ({"buffer": 16}, "buffer=8 where this stream has buffer=16"),
    ({"drop_last": True}, "drop_last=False where this stream has drop_last=True"),
    ({"column": "labels"}, "column='input_ids' where this stream has column='labels'"),
])
def test_a_place_from_another_stream_is_refused(changed, named):
    """A place keeps what identifies its stream: loaded into another class, seed, buffer or
    grouping, whose batches differ, it is refused naming what differs (it used to load and
    resume over another order, repeating or skipping rows)."""
    for saver, loader in zip(every_stream(), every_stream(**changed), strict=True):
        saver.set_epoch(1)
        iterator = iter(saver)
        next(iterator)
        state = saver.state_dict()
        with pytest.raises(ValueError, match=re.escape(named)):
            loader.load_state_dict(state)
        assert loader.state_dict()["batches"] == 0
    packed, grouped = every_stream()
    for saver, loader, named in ((packed, grouped, "class='PackedStream' where this stream "
                                  "has class='LengthGroupedStream'"),
                                 (grouped, packed, "class='LengthGroupedStream'")):
        with pytest.raises(ValueError, match=re.escape(named)):
            loader.load_state_dict(saver.state_dict())
    for options, named in (({"max_tokens": 32}, "max_tokens=64 where this stream has "
                            "max_tokens=32"), ({"truncate": True}, "truncate=False")):
        with pytest.raises(ValueError, match=re.escape(named)):
            every_stream(**options)[0].load_state_dict(packed.state_dict())
    with pytest.raises(ValueError, match=re.escape("batch_size=4 where this stream has "
                                                   "batch_size=2")):
        every_stream(batch_size=2)[1].load_state_dict(grouped.state_dict())


@pytest.mark.parametrize("kind", ["packed", "grouped"])
def test_a_batch_count_past_the_epochs_end_is_refused(kind):
    """A place claiming more batches than the reader's epoch has is a ValueError naming
    'batches' when the epoch's end is known (it used to load, and the pass was empty)."""
    stream = small_stream(kind)
    stream.set_epoch(1)
    total = len(list(stream))
    at_end = {**stream.state_dict(), "complete": False}
    resumed = small_stream(kind)
    resumed.load_state_dict(at_end)
    assert list(resumed) == []  # at the end exactly: nothing left, not an error
    past = small_stream(kind)
    past.load_state_dict({**at_end, "batches": total + 1})
    with pytest.raises(ValueError, match=rf"'batches'={total + 1} is past the end of epoch 1, "
                                         rf"which has {total} batch"):
        list(past)


@pytest.mark.parametrize("kind", ["packed", "grouped"])
def test_an_epoch_out_of_range_is_a_value_error(kind):
    stream = small_stream(kind)
    for epoch in (2**63, 2**64):
        with pytest.raises(ValueError, match="'epoch' must be below 2\\*\\*63"):
            stream.set_epoch(epoch)
    stream.set_epoch(2**63 - 1)
    assert stream.epoch == 2**63 - 1


@pytest.mark.parametrize("kind", ["packed", "grouped"])
def test_an_end_of_epoch_place_round_trips(kind):
    """`state_dict()` right after loading a place saved at an epoch's end gives that place (it
    used to say epoch 0, so saving and loading again replayed the epoch)."""
    stream = small_stream(kind)
    stream.set_epoch(1)
    assert list(stream)
    state = stream.state_dict()
    stream.set_epoch(2)
    following = list(stream)
    loaded = small_stream(kind)
    loaded.load_state_dict(state)
    assert loaded.state_dict() == state
    again = small_stream(kind)
    again.load_state_dict(loaded.state_dict())  # saved again before the loop went on
    batches = []
    for epoch in (1, 2):
        again.set_epoch(epoch)
        batches.extend(again)
    assert batches == following
    # Moving to another epoch drops the place, whichever epoch the stream was at.
    dropped = small_stream(kind)
    dropped.load_state_dict(state)
    dropped.set_epoch(0)
    assert dropped.state_dict()["epoch"] == 0 and dropped.state_dict()["batches"] == 0
    assert not dropped.state_dict()["complete"]


@pytest.mark.slow
def test_seeded_masks_differ_between_epochs_on_a_stream(tmp_path, bert_tokenizer):
    """The Trainer tells the collator its own epoch (not floor(steps / max_steps), which is 0
    for every epoch of a stream)."""
    sequences = [[101, *range(2000 + i, 2030 + i), 102] for i in range(16)]

    def labels_per_step(out):
        config = tiny_config("llama", "sdpa")
        config.vocab_size = len(bert_tokenizer)
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config)
        args = fastcollate.TrainingArguments(
            output_dir=str(out), per_device_train_batch_size=4, max_steps=8, seed=3,
            report_to="none", use_cpu=True, save_strategy="no", disable_tqdm=True)
        collator = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, seed=5)

        class Masks(fastcollate.Trainer):
            def compute_loss(self, model, inputs, *args, **kwargs):
                self.seen.append(inputs["labels"].clone())
                inputs = dict(inputs, labels=None)  # a causal model: only the masks matter
                return model(**inputs).logits.float().mean()

        trainer = Masks(model=model, args=args, data_collator=collator,
                        train_dataset=stream_of(sequences))
        trainer.seen = []
        trainer.train()
        return trainer.seen

    steps = labels_per_step(tmp_path / "a")
    assert len(steps) == 8  # two epochs of four batches, the same rows in each
    for batch in range(4):
        assert not torch.equal(steps[batch], steps[4 + batch]), f"batch {batch}"
    again = labels_per_step(tmp_path / "b")
    assert all(torch.equal(a, b) for a, b in zip(steps, again, strict=True))


@pytest.mark.slow
def test_resume_with_evaluation_and_seeded_masks(tmp_path, bert_tokenizer):
    """Evaluation during the epoch (eval_strategy="steps") masks with state of its own: a run
    resumed from a checkpoint inside an epoch trains the batches (masks included) and ends with
    the weights of the uninterrupted run."""
    sequences = [[101, *range(2000 + i, 2012 + i), 102] for i in range(16)]
    evaluation = datasets.Dataset.from_dict({"input_ids": sequences[:6]})

    class Masks(fastcollate.Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
            if model.training:
                self.seen.append((inputs["input_ids"].tolist(), inputs["labels"].tolist()))
            masked = inputs["labels"] != -100
            outputs = model(input_ids=inputs["input_ids"])
            loss = (outputs.logits.float().mean(-1) * masked).sum() / masked.sum().clamp(min=1)
            return (loss, outputs) if return_outputs else loss

    def run(out, stop_at=None, resume=None):
        config = tiny_llama_config(bert_tokenizer)
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(config)
        args = fastcollate.TrainingArguments(
            output_dir=str(out), per_device_train_batch_size=4, per_device_eval_batch_size=2,
            max_steps=10, seed=3, learning_rate=1e-2, report_to="none", use_cpu=True,
            save_strategy="no", eval_strategy="steps", eval_steps=2, disable_tqdm=True,
            dataloader_num_workers=0)
        collator = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, seed=5)
        trainer = Masks(model=model, args=args, data_collator=collator,
                        train_dataset=stream_of(sequences), eval_dataset=evaluation,
                        callbacks=[StopAfterSave(stop_at)] if stop_at else None)
        trainer.seen = []
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run(tmp_path / "full")
    assert len(full.seen) == 10  # four batches an epoch: into epoch 2
    stop = 6  # inside epoch 1, after evaluations at steps 2, 4 and 6
    stopped = run(tmp_path / "stop", stop_at=stop)
    assert stopped.seen == full.seen[:stop]
    resumed = run(tmp_path / "stop", resume=str(tmp_path / "stop" / f"checkpoint-{stop}"))
    assert resumed.seen == full.seen[stop:]
    for (name, ours), theirs in zip(resumed.model.state_dict().items(),
                                    full.model.state_dict().values(), strict=True):
        assert torch.equal(ours, theirs), name
