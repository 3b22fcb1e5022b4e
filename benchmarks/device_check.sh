#!/usr/bin/env bash
# The device check: the device tests and a short device benchmark on whatever accelerator this
# machine has (CUDA, else an NPU, else CPU torch), in under 8 minutes on one GPU.
#
#   benchmarks/device_check.sh            # everything; a copy of the output goes to $OUT if set
#   QUICK=1 benchmarks/device_check.sh    # tests and one round of the product benchmark only
#
# Each step has its own time limit and the script goes on after a failure, so one run shows
# everything; the exit status is that of the worst step. Python: $PYTHON, else .venv/bin/python,
# else python3; onebit is installed into it (no dependencies) if it does not import.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
LOG=${OUT:+$OUT/device_check.txt}
status=0

say() { echo "$@" | tee -a "${LOG:-/dev/null}"; }
step() {  # step SECONDS TITLE COMMAND...
    local limit=$1 title=$2; shift 2
    say ""; say "== $title (limit ${limit}s): $*"
    local start=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee -a "${LOG:-/dev/null}"
    local rc=${PIPESTATUS[0]}
    say "== $title: exit $rc in $((SECONDS - start))s"
    [ "$rc" -gt "$status" ] && status=$rc
    return 0
}

say "device check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname); python $PY"
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | tee -a "${LOG:-/dev/null}"
"$PY" -c "import onebit" 2>/dev/null || "$PY" -m pip install -q --no-deps -e . \
    | tee -a "${LOG:-/dev/null}"
DEVICE=$("$PY" - <<'PY'
from pytest_onebit.device import resolve
for name in ("cuda", "npu"):
    if resolve(name)[0]:
        print(name)
        break
else:
    print("torch" if resolve("torch")[0] else "host")
PY
)
say "backend: $DEVICE"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1 \
    | tee -a "${LOG:-/dev/null}"

step 240 "device tests" "$PY" -m pytest tests/device -m device --onebit-device="$DEVICE" \
    -q -rs -p no:cacheprovider
step 120 "backend invariance" "$PY" -m pytest tests/backends -q -rs -p no:cacheprovider
if [ "$DEVICE" = cuda ] || [ "$DEVICE" = torch ]; then
    rounds=$([ -n "${QUICK:-}" ] && echo 1 || echo 3)
    step 60 "torch kernels: invariance and cost" "$PY" benchmarks/backend_ab.py \
        --backend "$DEVICE" --rounds "$rounds"
fi
if [ -z "${QUICK:-}" ]; then
    step 180 "forward: step, verify(R)/step, plain vs speculative, residency" \
        "$PY" benchmarks/forward_ab.py --backend "$DEVICE" --rounds 3 --tokens 24
fi
say ""; say "device check: exit $status"
exit "$status"
