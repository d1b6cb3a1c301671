#!/usr/bin/env bash
# The GPU check of the local service, as one call on a lent GPU machine (see docs/training.md).
#
# The machine has JAX, torch, transformers and optax but no network: the packages it lacks travel as
# wheels in .whl/ (git-ignored), fetched here for its Python 3.12 with `pip download --no-deps
# --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 ...`: tinker 0.38.0 and, of
# its needs, pydantic, pydantic-core, annotated-types, typing-inspection, typing-extensions, distro,
# orjson, pyqwest, opentelemetry-api, sniffio, zstandard, h2, hpack, hyperframe (about 15 MB).
# Prints, and writes under $OUT: the local service's tests on the GPU, then the local benchmark at a
# GPU-sized workload (`python -m benchmarks local` on the machine gives the CPU workload).
# On an H100 (2026-11-26) 25 of its tests took about 200 s in one process, most of it compilation, and 42
# of the 43 ended within 330 s over six processes (2026-11-27): run it with the call's whole limit (600 s,
# of which the benchmark takes about 200 s); it needs the wheels of .whl/ carried (`carry: [".whl"]`, the
# folder is git-ignored).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
nvidia-smi -L
python3 -c "import jax, torch, transformers; print('jax', jax.__version__, jax.devices(), 'torch', torch.__version__, \
torch.cuda.is_available(), 'transformers', transformers.__version__)"
# every test of the local model, service and loop, each named as it ends; over six processes where
# pytest-xdist is there (compilation, not the GPU, is most of their time; ten processes were slower)
workers=$(python3 -c "import xdist" 2>/dev/null && echo "-n 6" || true)
timeout 330 python3 -m pytest -v -p no:cacheprovider -p no:benchmark $workers tests/test_local_service.py tests/test_local_loop.py \
    tests/test_local_model.py tests/test_local_devices.py tests/test_local_questions.py 2>&1 \
    | tee "$OUT/tests.txt" | tail -15
timeout 240 python3 -m benchmarks local --size base --batch 64 --prompt-len 64 --new 128 --seq 512 2>&1 \
    | tee "$OUT/base.txt" | grep -v '^{'
