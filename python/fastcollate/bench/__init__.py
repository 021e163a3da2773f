"""`python -m fastcollate bench`: fastcollate timed against transformers on the same batches.

Not part of the library's API; the modules, lowest layer first:

- `errors`: `BenchError`, what stops a benchmark.
- `workload`: the synthetic rows and length distributions, the row formats, the tokenizer.
- `checks`: fastcollate's output compared with transformers' before anything is timed.
- `baselines`: hand-written padding loops, transformers' collators.
- `cases`: the table of collators the benchmark times.
- `timing`: the timing loop, its result records, the release-build check.
- `report`: the table, the JSON record, the plot, the environment.
- `sampling`: `--sampling`, real tokens and time per epoch of the training samplers.
- `cli`: the command line.
"""
