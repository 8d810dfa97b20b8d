# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: install browser-deps run test lint typecheck bench-embed services clean

# Re-running is quick: pip runs only when requirements.txt changed since the last install.
$(INSTALLED): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	touch $(INSTALLED)

install: $(INSTALLED)

# What the browser tests (tests/browser/) inject into pages: axe-core, pinned in
# package-lock.json. Without it (or without Chromium) those tests skip and say why.
AXE := node_modules/axe-core/axe.min.js
$(AXE): package-lock.json
	npm ci --no-audit --no-fund
	touch $(AXE)

browser-deps: $(AXE)

run: install
	$(PY) -m searchsite.supervisor

# A type error fails the tests as a lint error does.
test: install lint typecheck
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy .

services: install
	$(PY) manage.py services

bench-embed: install
	$(PY) bench/embed.py

clean:
	rm -rf $(VENV) .run node_modules
