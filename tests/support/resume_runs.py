"""What the resume tests share: a Trainer that records every batch it trains on, and a callback
that checkpoints at one step and stops there, as if the job were killed right after saving."""

from __future__ import annotations

import transformers

import fastcollate


class Recording(fastcollate.Trainer):
    def compute_loss(self, model, inputs, *args, **kwargs):
        self.seen.append(inputs["input_ids"].tolist())
        return super().compute_loss(model, inputs, *args, **kwargs)


class StopAfterSave(transformers.TrainerCallback):
    """Saves a checkpoint at step `at` and stops there, as if the job were killed after it."""

    def __init__(self, at):
        self.at = at

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.at:
            control.should_save = True

    def on_save(self, args, state, control, **kwargs):
        control.should_training_stop = True
