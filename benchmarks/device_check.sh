#!/usr/bin/env bash
# The GPU check of the local service, as one call on a lent GPU machine (see docs/training.md).
#
# The machine has JAX, torch, transformers and optax but no network: the few packages it lacks (tinker
# and what it needs) travel as wheels in .whl/ (fetch them with `pip download --no-deps` for its Python).
# Prints, and writes under $OUT: the local benchmark at the CPU workload and at a GPU-sized one (each with
# both float32 matmul settings), and the local service's tests on the GPU.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
nvidia-smi -L
python3 -c "import jax, torch, transformers; print('jax', jax.__version__, jax.devices(), 'torch', torch.__version__, \
torch.cuda.is_available(), 'transformers', transformers.__version__)"
bench() {  # name, then the benchmark's flags
    local name=$1
    shift
    timeout 240 python3 -m benchmarks local "$@" 2>&1 | tee "$OUT/$name.txt" | grep -v '^{'
}
bench small_tf32 --fp32-matmul tf32
bench small_full --fp32-matmul full
bench base_tf32 --size base --batch 64 --prompt-len 64 --new 128 --seq 512 --fp32-matmul tf32
bench base_full --size base --batch 64 --prompt-len 64 --new 128 --seq 512 --fp32-matmul full
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_local_service.py tests/test_local_loop.py 2>&1 \
    | tee "$OUT/tests.txt" | tail -25
