#!/usr/bin/env bash
# Rewrites every committed results file in benches/results/ (on a quiet machine: the figures
# are published), then the figures on the pages and the plots, then checks them.
#
# From the repository root, with a release build of fastcollate and the test dependencies
# (`maturin develop --release` in the test venv, or `pip install '.[transformers,trl,plot]'`
# plus datasets). The commands are `RESULTS` in benches/render_figures.py, in order; about
# 45-70 minutes on a quiet 2-core machine, most of it collators.json. The GPU results file is
# written on a GPU machine instead (benches/gpu_run.py).
set -euo pipefail
cd "$(dirname "$0")/.."
python -c "import fastcollate, sys; sys.exit(fastcollate.build_profile != 'release')" || {
    echo "error: fastcollate is not a release build: maturin develop --release" >&2
    exit 1
}
python benches/render_figures.py --run
python benches/render_figures.py --check
