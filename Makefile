# Two commands: `make lab` opens the workbench, `make test` runs every test. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The install is redone when the project's requirements change.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
PIP_INSTALL := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt
# One pytest worker per core (pytest-xdist), a file's tests on one worker: module fixtures are built once and a
# notebook's cells run in order in one kernel. `make test PYTEST_ARGS=` runs everything in one process.
PYTEST_ARGS ?= -n auto --dist loadfile

LINT_PATHS := devcopy_lib widgets tests benchmarks tools conftest.py

.PHONY: lab lint test test-fast test-deep mutation report browser-deps widget-js clean gpu-wheels gpu-check

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip setuptools
	$(PIP_INSTALL) -e ".[lab,test,reference,models]"
	rm -f $(VENV)/.installed-*; touch $@

install: $(STAMP)

# Debian's Chromium for the browser test (root on this machine, CI and containers; sudo elsewhere).
browser-deps:
	@test -x /usr/bin/chromium || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

# Rebuild the graph view's bundle (widgets/static/graph_view.js, committed) from widgets/js/: needs node + npm.
widget-js:
	cd widgets/js && npm ci --no-audit --no-fund && npm run build

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

# Lint, format, types and the float rule: clean before any test runs (`make test` starts here).
lint: $(STAMP)
	$(BIN)/python -m ruff check $(LINT_PATHS)
	$(BIN)/python -m ruff format --check $(LINT_PATHS)
	$(BIN)/python -m mypy
	$(BIN)/python tools/lint/float_compare.py tests

test: $(STAMP) browser-deps lint
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests - that is a failure here" >&2; exit 1; fi; exit $$rc

# The unit tests alone (no notebooks, no browser): the quick loop while developing.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not browser" -p no:nbval tests

# The deep property tests alone: randomized (not derandomized), many more examples; not part of `make test`.
test-deep: $(STAMP)
	$(BIN)/python -m pytest -p no:nbval --deep -m deep tests

# Mutation testing of the kernels, the placement pass, the runtime plan and method, memory planning, the allocator
# template, partitioning and hoisting (docs/testing.md): over an hour on 2 cores; run it on an idle machine.
mutation: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt "mutmut>=3.8"
	rm -rf mutants && mkdir mutants  # mutants/ must exist before Python starts, or the import system skips it
	PYTHONPATH=$$PWD/mutants OMP_NUM_THREADS=1 $(BIN)/mutmut run --max-children $$(nproc); $(BIN)/mutmut results

# The CUDA machine has torch, CuPy and CUDA but no network: `make gpu-wheels` (on a networked machine) downloads what
# it lacks for its Python and platform into .whl/; `make gpu-check` (there, with .whl/ copied along) installs them
# beside the machine's own packages and runs every GPU check (benchmarks/gpu_check.py -> docs/data/gpu_check.json).
GPU_PYTHON ?= 3.12
GPU_WHEELS := executorch==1.5.1 flatbuffers ruamel.yaml tabulate torchao==0.18.0 wcwidth \
	pytest pytest-timeout pluggy iniconfig packaging hypothesis attrs sortedcontainers \
	ipywidgets anywidget traitlets comm widgetsnbextension jupyterlab_widgets psygnal ipython decorator jedi parso \
	matplotlib-inline pexpect ptyprocess prompt_toolkit pygments stack_data asttokens executing pure_eval \
	ipython_pygments_lexers
GPU_PLATFORMS := $(foreach n,17 24 27 28 31 34 35,--platform manylinux_2_$(n)_x86_64) --platform manylinux2014_x86_64
GPU_SITE := build/gpu-site
GPU_CHECK_ARGS ?=  # e.g. --only tests --update: rerun some stages into the existing docs/data/gpu_check.json

gpu-wheels:
	python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version $(GPU_PYTHON) --implementation cp \
	  $(GPU_PLATFORMS) -d .whl $(GPU_WHEELS)

gpu-check:
	@ls .whl/executorch-*.whl >/dev/null 2>&1 || { echo "make gpu-check: no .whl/ here: run make gpu-wheels on a networked machine and copy .whl/ along" >&2; exit 2; }
	python3 -m pip install --quiet --no-index --no-deps --no-compile --upgrade --target $(GPU_SITE) .whl/*.whl
	ln -sfn $$PWD/widgets $(GPU_SITE)/devcopy_widgets  # the import name the install maps widgets/ to
	DEVCOPY_GPU_CHECK_MAKE="make gpu-check $(GPU_CHECK_ARGS)" PYTHONPATH=$(GPU_SITE):$$PWD PYTHONUNBUFFERED=1 \
	  python3 benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

report: $(STAMP)
	mkdir -p report
	$(BIN)/jupyter nbconvert --to html --execute --output-dir report notebooks/*.ipynb

clean:
	rm -rf $(VENV) report test-artifacts
