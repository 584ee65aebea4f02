# Everything a fresh machine with Python 3.11+ needs: `make demo`, `make test`, `make bench`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install compiler chromium demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# graphfix installs editable with its dependencies, once (keyed by pyproject.toml): an edit
# in graphfix/ or transforms/ is live without a reinstall.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

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
test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -n auto --dist loadfile

bench: install
	$(BIN)/python fixtures/bench/run_bench.py

clean:
	rm -rf $(VENV) build dist
