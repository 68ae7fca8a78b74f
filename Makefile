# make setup: Docker engine, podman, chromium, base images, .venv (idempotent). make test: the suite.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: typecheck-links setup docker podman browser venv llama base-image podman-base-image test test-fast lint bench bench-inject bench-dedup clean-containers

setup: docker podman browser venv llama base-image podman-base-image

docker:
	bash scripts/setup_docker.sh

podman:
	bash scripts/setup_podman.sh

browser:
	bash scripts/setup_browser.sh

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

llama: venv
	VENV=$(VENV) bash scripts/setup_llama.sh

base-image: venv docker
	$(BIN)/trajforge base-image --python 3.9 --python 3.11 --python 3.13  # others on demand

# podman keeps its own images: Docker's base image is copied in (the same image, not a rebuild).
podman-base-image: venv podman base-image
	$(BIN)/trajforge base-image --sandbox podman --python 3.11

# --durations: every run's log names its slowest tests, so the suite's time is read, not guessed.
# TEST_WORKERS (default 2): pytest-xdist workers, each module on one worker (--dist loadfile: a
# module's builds are made once), the heavy modules first (tests/conftest.py); 0: one process.
TEST_WORKERS ?= 2
XDIST = $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
test: lint
	$(BIN)/pytest -q --durations=30 $(XDIST) tests

# Everything that needs no engine, cluster, server or browser: the loop while editing (CI runs `test`).
FAST = not docker and not podman and not dask and not s3 and not llama and not browser and not slow
test-fast:
	$(BIN)/pytest -q --durations=15 -m "$(FAST)" tests

lint: typecheck-links
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/check_layers.py
	$(BIN)/python scripts/check_container_python.py
	$(BIN)/mypy

# mypy reads the package as installed (trajforge.<folder>, and trajforge itself: pipelines/api/)
# through links; setuptools' editable hook is invisible to it.
typecheck-links:
	mkdir -p .typecheck/trajforge
	for f in pipelines generators verifiers filters schemas; do ln -sfn ../../$$f .typecheck/trajforge/$$f; done
	ln -sfn ../../pipelines/api/__init__.py .typecheck/trajforge/__init__.py

bench:
	@test -n "$(REPO)" || { echo "usage: make bench REPO=path/to/a/git/repo [ARGS=...]"; exit 2; }
	$(BIN)/python benchmarks/validate.py --repo $(REPO) $(ARGS)

bench-inject:
	@test -n "$(REPO)" || { echo "usage: make bench-inject REPO=path/to/a/git/repo [ARGS=...]"; exit 2; }
	$(BIN)/python benchmarks/inject.py --repo $(REPO) $(ARGS)

bench-dedup:
	$(BIN)/python benchmarks/dedup.py $(ARGS)

clean-containers:
	$(BIN)/trajforge janitor
