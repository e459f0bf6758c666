# trainhub: `make run` starts everything on the embedded defaults; `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-browser bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,browser]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) -m trainhub.devrun

test: $(STAMP)
	$(PY) -m pytest -m "not browser"

test-browser: $(STAMP)
	$(PY) -m pytest -m browser

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) var .pytest_cache
