"""`python -m fastcollate bench`: fastcollate timed against transformers on the same batches.

Not part of the library's API. Every module serves a mode of the command users run (the
committed results files in benches/results/ are written by these modes); the scripts in
benches/ reuse the workload, timing and report modules rather than ship code of their own.
The modules, lowest layer first:

- `errors`: `BenchError`, what stops a benchmark.
- `workload`: the synthetic rows and length distributions, the row formats, the tokenizer.
- `checks`: fastcollate's output compared with transformers' before anything is timed.
- `baselines`: hand-written padding loops, transformers' collators.
- `floor`: the least work a call must do for the same rows (a native loop only the benchmark
  calls), timed beside fastcollate and checked to give its output.
- `cases`: the table of collators the benchmark times.
- `timing`: the timing loop, its result records, the release-build check.
- `report`: the table, the JSON record, the plot, the environment.
- `sampling`: `--sampling`, real tokens and time per epoch of the training samplers.
- `trl_workload`, `trl_suite`: `--cases trl`, TRL's collators, SFT dataset preparation and
  `pack_dataset` against fastcollate's (imported only in that mode: they import TRL).
- `speech_suite`: `--cases speech`, feature-extractor padding of raw audio.
- `cli`: the command line.
"""
