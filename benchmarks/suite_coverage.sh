#!/usr/bin/env bash
# Line coverage of src/ by the whole suite (`make test`'s tests), every Python process measured: pytest, its xdist
# workers and every workflow job, Snakemake and SLURM job they start (issue 51: "no check is lost").
#
#   benchmarks/suite_coverage.sh [CHECKOUT]     # default: this checkout; prints the report's TOTAL line last
#
# CHECKOUT may be another commit's worktree (`git worktree add /tmp/old REV`): its src/ is put first on PYTHONPATH,
# so its code is the one measured with this checkout's .venv. Needs coverage.py 7 (`.venv/bin/pip install coverage`).
# How: a sitecustomize.py on PYTHONPATH starts coverage in every Python process that inherits COVERAGE_PROCESS_START
# (coverage.process_startup); each process writes its own data file, combined at the end. Tests that build their
# subprocesses' environment from scratch are not measured in those subprocesses.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
checkout="$(cd "${1:-$here}" && pwd)"
python="$here/.venv/bin/python"
"$python" -c "import coverage" 2>/dev/null || { echo "coverage.py is missing: $here/.venv/bin/pip install coverage" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/site" "$work/data"
cat > "$work/site/sitecustomize.py" <<'EOF'
import os

if os.environ.get("COVERAGE_PROCESS_START"):
    import coverage

    coverage.process_startup()
EOF
cat > "$work/coveragerc" <<EOF
[run]
source_pkgs = certified_circuits
parallel = true
data_file = $work/data/.coverage
[report]
precision = 1
EOF
cd "$checkout"
status=0
PYTHONPATH="$checkout/src:$work/site" COVERAGE_PROCESS_START="$work/coveragerc" PATH="$here/.venv/bin:$PATH" \
    "$python" -m pytest -q -p no:cacheprovider -n logical --maxprocesses 4 --dist loadfile --no-loadscope-reorder \
    --basetemp="$work/pytest" tests >&2 || status=$?
"$python" -m coverage combine --rcfile="$work/coveragerc" -q
"$python" -m coverage report --rcfile="$work/coveragerc" | tail -1
exit "$status"
