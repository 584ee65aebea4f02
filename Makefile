# Everything a fresh machine with Python 3.10+ needs: `make demo`, `make test`, `make bench`.
# (graphfix itself runs on 3.9+; the suite's TensorFlow, 2.21, wants 3.10+.)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The lean install: graphfix's base dependencies and the test runner, no TensorFlow.
LEAN := .venv-lean
LEAN_STAMP := $(LEAN)/.installed

.PHONY: install lean compiler chromium demo test test-full test-lean bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# graphfix installs editable with its dependencies, once (keyed by pyproject.toml): an edit
# in graphfix/ or transforms/ is live without a reinstall.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

# The lean venv: `pip install graphfix` as a user without TensorFlow gets it (editable, as
# above), with pytest: the suite's TF-free tests run there, and those that need TF skip.
$(LEAN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(LEAN)
	$(LEAN)/bin/python -m pip install --quiet --upgrade pip
	$(LEAN)/bin/python -m pip install --quiet -e ".[test-runner]"
	touch $(LEAN_STAMP)

lean: $(LEAN_STAMP)
	$(LEAN)/bin/python -m compileall -q graphfix transforms > /dev/null

# Bytecode written now, as pip writes it for a regular install, so that no run compiles
# graphfix's modules from source (where PYTHONDONTWRITEBYTECODE is set, every run would).
install: $(STAMP) compiler chromium
	$(BIN)/python -m compileall -q graphfix transforms > /dev/null

# The custom-op tests compile a real TF op (fixtures/custom_ops/build_ops.py). Where no C++
# compiler is present, g++ is installed if we can (Debian/Ubuntu, as root); elsewhere a line
# says so and the install goes on (those tests then fail naming the missing compiler).
compiler:
	@if [ -z "$$CXX" ] && ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "no C++ compiler: installing g++ (apt-get)"; \
	    (apt-get update -qq && apt-get install -y -qq g++) \
	      || echo "warning: apt-get could not install g++: the custom-op tests will fail" >&2; \
	  else \
	    echo "warning: no C++ compiler (c++ or g++) and no root apt-get to install one:" \
	      "the custom-op tests will fail; install g++ or set CXX" >&2; \
	  fi; \
	fi

# The HTML report's tests load the page in a real headless Chromium: installed like the
# compiler where missing (as root with apt-get); elsewhere a warning, and those tests fail
# naming the missing chromium.
chromium:
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "no chromium: installing it (apt-get)"; \
	    (apt-get update -qq && apt-get install -y -qq chromium) \
	      || echo "warning: apt-get could not install chromium: the HTML report tests will fail" >&2; \
	  else \
	    echo "warning: no chromium and no root apt-get to install it:" \
	      "the HTML report tests will fail; install chromium" >&2; \
	  fi; \
	fi

demo: install
	$(BIN)/graphfix demo

# One test process per core (a test file stays in one process: its module fixtures, such as
# the real graphs a BACKGROUND_SCRIPT builds, are built once).
PYTEST := -m pytest -q -p no:cacheprovider -n auto --dist loadfile
# `make test`: every test once. First without TensorFlow (the lean install: the TF-free tests
# pass there, the others skip), then with it: the tests the lean run skipped, and those marked
# both_installs (tests/conftest.py says why a TF-free pass need not run again).
# `make test-full` and `make test-lean` each run the whole suite in one install.
PASSED_WITHOUT_TF := $(LEAN)/passed-without-tf.txt
test: install lean
	rm -f $(PASSED_WITHOUT_TF)
	GRAPHFIX_PASSED_WITHOUT_TF=$(PASSED_WITHOUT_TF) $(LEAN)/bin/python $(PYTEST)
	GRAPHFIX_PASSED_WITHOUT_TF=$(PASSED_WITHOUT_TF) $(BIN)/python $(PYTEST)

test-full: install
	$(BIN)/python $(PYTEST)

test-lean: lean
	$(LEAN)/bin/python $(PYTEST)

bench: install
	$(BIN)/python fixtures/bench/run_bench.py

clean:
	rm -rf $(VENV) $(LEAN) build dist
