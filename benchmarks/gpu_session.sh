#!/usr/bin/env bash
# One GPU session (issue 37): the CUDA tests, the paper-scale benchmark and the paper fixture run through
# Snakemake with `device: auto`, on a machine whose python3 has torch with CUDA but not this project's other
# dependencies. Run from the repository root:
#
#   OUT=/tmp/gpu_out bash benchmarks/gpu_session.sh
#
# Dependencies the machine lacks travel as wheels in .whl/ (Python 3.12, manylinux x86-64; downloaded with
# `pip download --no-deps --only-binary=:all: --python-version 3.12 ...`, see docs/results.md, "GPU"). Each step
# has a time limit and writes its log under $OUT as it goes, so an interrupted session still tells what ran.
# The whole session ends within BUDGET_S seconds (default 560), the fixture run within FIXTURE_S (240).
set -u -o pipefail
OUT=${OUT:-$PWD/gpu_out}
BUDGET_S=${BUDGET_S:-560}
STEPS=${STEPS:-cuda fixture bench startup unit}  # which steps run, in this order
FIXTURE_S=${FIXTURE_S:-240}  # at most this long for the fixture run; the benchmark gets the rest
mkdir -p "$OUT"
t0=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - t0))); }
want() { [[ " $STEPS " == *" $1 "* ]]; }
step() { echo "== +$(($(date +%s) - t0))s $*" | tee -a "$OUT/steps.log" >&2; }

step setup
if ! python3 -c 'import snakemake, transformer_lens' 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl >>"$OUT/steps.log" 2>&1 || { step "wheel install failed"; exit 1; }
fi
mkdir -p /tmp/site/bin
export PYTHONPATH="/tmp/site:$PWD/src" PATH="/tmp/site/bin:$PATH" PYTHONUNBUFFERED=1 MPLBACKEND=Agg
printf '#!/usr/bin/env python3\nimport sys\nfrom certified_circuits.cli.main import main\nsys.exit(main())\n' \
    >/tmp/site/bin/certified-circuits
chmod +x /tmp/site/bin/certified-circuits
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    nproc
    python3 -c 'import torch, torchvision, transformers, numpy, snakemake
print("python", __import__("sys").version.split()[0], "torch", torch.__version__, "torchvision", torchvision.__version__,
      "transformers", transformers.__version__, "numpy", numpy.__version__, "snakemake", snakemake.__version__)
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "-")'
} 2>&1 | tee -a "$OUT/steps.log"

if want cuda; then
    step "1. CUDA tests: the modules with CUDA paths (gpu-marked tests run here, not skipped)"
    timeout 150 python3 -m pytest -q -p no:cacheprovider -rs tests/unit/core/test_devices.py tests/unit/core/test_votes_torch.py \
        tests/unit/cli/test_errors.py -m "gpu or not slow" >"$OUT/cuda_tests.log" 2>&1
    step "CUDA tests rc $? ($(tail -1 "$OUT/cuda_tests.log"))"
fi

if want fixture; then
    step "2. the paper fixture run through Snakemake, device auto"
    python3 tests/helpers/paper_fixtures.py paper_fixture_data >"$OUT/fixture.log" 2>&1
    start=$(date +%s)
    timeout $((FIXTURE_S < $(left) - 250 ? FIXTURE_S : $(left) - 250)) bin/workflow --cores "$(nproc)" --configfile configs/paper.yaml configs/paper_fixture.yaml \
        >>"$OUT/fixture.log" 2>&1
    rc=$?
    step "fixture run rc $rc in $(($(date +%s) - start)) s"
    {
        echo "job logs naming their device:"
        grep -rh "device: " results/paper_fixture/logs 2>/dev/null | sed 's/.*\(device: .*\)/\1/' | sort | uniq -c
        echo "job logs with a model and no device line:"
        grep -rlE "start-up|language-attribute|language-evaluate" results/paper_fixture/logs 2>/dev/null \
            | xargs -r grep -LE "device: "
        echo "start-up lines:"
        grep -rh "start-up" results/paper_fixture/logs 2>/dev/null | sed 's/^.*INFO[^:]*: //'
    } >"$OUT/devices.txt" 2>&1
    tar czf "$OUT/fixture_logs.tgz" results/paper_fixture/logs 2>/dev/null
fi

if want bench; then
    step "3. bench_gpu_paper_scale.py at paper sizes"
    timeout $(($(left) - 20)) python3 benchmarks/bench_gpu_paper_scale.py >"$OUT/bench.log" 2>&1
    step "bench rc $? ($(tail -1 "$OUT/bench.log"))"
fi

if want startup; then
    step "4. start-up share of a 50-class attribution job, and where the start-up goes"
    timeout $(($(left) - 30)) python3 benchmarks/bench_startup_share.py >"$OUT/startup.log" 2>&1
    step "startup rc $? ($(tail -1 "$OUT/startup.log"))"
    python3 - >>"$OUT/startup.log" 2>&1 <<'PY'
import time
t = time.perf_counter()
def lap(what):
    global t
    now = time.perf_counter(); print(f"{what}: {now - t:.2f} s"); t = now
import torch; lap("import torch")
import torchvision; lap("import torchvision")
torch.zeros(1, device="cuda"); lap("CUDA context")
from certified_circuits.cli import vision_circuits; lap("import the vision CLI")
net = torchvision.models.resnet50(weights=None); lap("build ResNet-50 (random init)")
net.to("cuda"); torch.cuda.synchronize(); lap("ResNet-50 to the GPU")
PY
fi

if want unit; then
    step "1b. the fast unit suite ($(left) s left)"
    if [ "$(left)" -gt 40 ]; then
        timeout $(($(left) - 10)) python3 -m pytest -q -p no:cacheprovider -m "not slow" -n 8 tests/unit \
            >"$OUT/unit.log" 2>&1
        step "unit suite rc $? ($(tail -1 "$OUT/unit.log"))"
    fi
fi
step done
