"""transformers' Trainers with the training order `fastcollate.Trainer` gives under
`train_sampling_strategy="group_by_length"`: transformers' own LengthGroupedSampler, shuffled
with a generator seeded `data_seed` (else `seed`) + epoch at each epoch (transformers draws from
the global generator), so the parity tests compare everything else batch for batch."""

from __future__ import annotations

import torch
import transformers
from transformers import trainer_pt_utils


class EpochSeeded(torch.utils.data.Sampler):
    """`sampler` (transformers' LengthGroupedSampler) reshuffled from seed + epoch."""

    def __init__(self, sampler, seed):
        self.sampler, self.seed, self.epoch = sampler, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return len(self.sampler)

    def __iter__(self):
        self.sampler.generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(self.sampler)


def seeded_grouping(trainer_class):
    """`trainer_class` (a transformers Trainer) whose length-grouped training sampler is
    `EpochSeeded`."""

    class Seeded(trainer_class):
        def _get_train_sampler(self, train_dataset=None):
            sampler = super()._get_train_sampler(train_dataset)
            if type(sampler) is trainer_pt_utils.LengthGroupedSampler:
                args = self.args
                seed = args.data_seed if args.data_seed is not None else args.seed
                sampler = EpochSeeded(sampler, seed)
            return sampler

    Seeded.__name__ = Seeded.__qualname__ = f"Seeded{trainer_class.__name__}"
    return Seeded


SeededTrainer = seeded_grouping(transformers.Trainer)
SeededSeq2SeqTrainer = seeded_grouping(transformers.Seq2SeqTrainer)
