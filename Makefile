# trainhub: `make run` starts everything on the embedded defaults; `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint test-browser docs bench bench-compare chaos chaos-short install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,browser]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) -m trainhub.devrun

# One test process per core (pytest-xdist); TEST_PROCESSES=0 runs the suite in this process.
TEST_PROCESSES ?= auto

test: $(STAMP)
	$(PY) -m pytest -m "not browser" -n $(TEST_PROCESSES)

# pyflakes, pycodestyle's errors and bugbear ([tool.ruff] in pyproject.toml); CI runs it first.
lint: $(STAMP)
	$(VENV)/bin/ruff check .

test-browser: $(STAMP)
	$(PY) -m pytest -m browser

# The documentation site (docs/, mkdocs.yml) into var/site; --strict fails on a broken link.
docs: $(STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	$(VENV)/bin/mkdocs build --strict --site-dir var/site

bench: $(STAMP)
	$(PY) -m bench

# The two newest runs in var/bench side by side (or RUNS="before.json [after.json]").
bench-compare: $(STAMP)
	$(PY) -m bench.compare $(RUNS)

# Reliability drills against real processes (embedded default, or DATABASE_URL/REDIS_URL).
# `make chaos CHAOS_SHORT=1` (= `make chaos-short`) is the CI form.
chaos: $(STAMP)
	$(PY) -m bench.chaos $(if $(filter-out 0,$(CHAOS_SHORT)),--short)

chaos-short: $(STAMP)
	$(PY) -m bench.chaos --short

clean:
	rm -rf $(VENV) var .pytest_cache
