# certified-circuits: two entry points, each sets up everything it needs.
#   make reproduce   create .venv if missing, install, run the embedded default workflow end to end
#   make test        create .venv if missing, install, run the test suite (everything; one pytest-xdist worker per
#                    core, at most 4; the shared workflow runs start once: docs/testing.md)
#   make test-fast   the unit tests only (no workflow, no training; under 2 minutes)
#   make lint        ruff (lint and format check) and mypy (the engine and the public API)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORES  ?= all
STAMP  := $(VENV)/.installed
# pytest-xdist workers: one per logical core, at most 4 (WORKERS=0 runs everything in one process); a file's tests
# share one worker (its module fixtures are built once), the long files start first (tests/conftest.py)
WORKERS ?= logical
XDIST   := -n $(WORKERS) --maxprocesses 4 --dist loadfile --no-loadscope-reorder

.PHONY: reproduce test test-fast lint bench smoke docs clean-results

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	@touch $(STAMP)

reproduce: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bin/workflow --cores $(CORES) --profile profiles/local

test: $(STAMP)
	$(BIN)/python -m pytest -q $(XDIST) --durations=15 tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow" tests/unit

# ruff format owns the engine, the public API, the tracking package and the modules written since; the other modules keep their
# hand-wrapped style (dense argument lists) and are linted like everything else.
FORMATTED := src/certified_circuits/core src/certified_circuits/api.py src/certified_circuits/__init__.py \
             src/certified_circuits/pipeline/tracking tests/unit/project/test_api.py tests/unit/project/test_architecture.py \
             src/certified_circuits/reports/explorer.py src/certified_circuits/reports/explorer_data.py \
             src/certified_circuits/reports/html.py src/certified_circuits/reports/words.py \
             src/certified_circuits/vision/networks/families.py src/certified_circuits/vision/scoring/plugins.py src/certified_circuits/vision/data/folders.py \
             src/certified_circuits/cli/vision.py src/certified_circuits/cli/vision_common.py src/certified_circuits/cli/vision_data.py \
             src/certified_circuits/cli/vision_circuits.py src/certified_circuits/cli/vision_imagenet.py

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks experiments
	$(BIN)/ruff format --check $(FORMATTED)
	$(BIN)/mypy

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

smoke: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bin/workflow --cores $(CORES) --profile profiles/local --configfile configs/smoke.yaml

# Copy the headline tables and figures of a full run into docs/ (committed); RUN is its results folder
# (bin/model-seeds: RUN=results/model_seeds/s0), SEEDS the folder of bin/model-seeds.
RUN   ?= results
SEEDS ?= results/model_seeds
docs:
	mkdir -p docs/figures
	for t in peaks_cacc peaks_balanced selected_cacc selected_balanced runtime; do cp $(RUN)/tables/world/$$t.md docs/vision_$$t.md; done
	for t in peaks_cacc selected_cacc; do cp $(RUN)/tables/tiny_gpt2/$$t.md docs/language_$$t.md; done
	cp $(RUN)/tables/world/faithfulness_mean.md docs/vision_faithfulness.md
	cp $(RUN)/tables/tiny_gpt2/faithfulness_mean.md docs/language_faithfulness.md
	cp $(RUN)/tables/world/attack/attack.md docs/vision_attack.md
	cp $(RUN)/tables/tiny_gpt2/attack/attack.md docs/language_attack.md
	cp $(RUN)/tables/world/attack/attack.png docs/figures/attack_vision.png
	cp $(RUN)/tables/tiny_gpt2/attack/attack.png docs/figures/attack_language.png
	cp $(RUN)/tables/world/curves_cacc.png $(RUN)/tables/world/curves_balanced_accuracy.png docs/figures/
	cp $(RUN)/tables/world/iou.png $(RUN)/tables/world/seed_stability.png $(RUN)/tables/world/spurious.png docs/figures/
	cp $(RUN)/tables/world/radius_sweep_best_k.png docs/figures/
	cp $(RUN)/figures/world/features_circle.png docs/figures/
	cp $(RUN)/tables/world/mean_ablation/selected_balanced.md docs/vision_mean_ablation_selected_balanced.md
	cp $(RUN)/tables/world/mean_ablation/curves_balanced_accuracy.png docs/figures/mean_ablation_curves_balanced_accuracy.png
	for x in world tiny_gpt2; do cp $(RUN)/tables/$$x/testbed/recovery_summary.md docs/$${x}_recovery.md; \
	  cp $(RUN)/tables/$$x/testbed/stability_summary.md docs/$${x}_stability.md; \
	  cp $(RUN)/tables/$$x/testbed/recovery.png docs/figures/recovery_$$x.png; done
	cp $(RUN)/summary.md docs/summary.md
	if [ -d $(SEEDS)/tables ]; then mkdir -p docs/model_seeds && cp $(SEEDS)/tables/*.md docs/model_seeds/; fi

clean-results:
	rm -rf results .snakemake
