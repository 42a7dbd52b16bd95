# Two commands do all set-up on a fresh machine (see README.md):
#   make demo   -- the main job: compile the seed example reduce_sum(x + y*z), print and dump it
#   make test   -- the whole test suite
.PHONY: demo test lint docs

VENV := .venv
PY := $(VENV)/bin/python

$(VENV)/.installed-stamp: pyproject.toml scripts/bootstrap.sh
	bash scripts/bootstrap.sh

demo: $(VENV)/.installed-stamp
	$(PY) -m xla_teach.demo

test: $(VENV)/.installed-stamp
	$(PY) -m ruff check .
	$(PY) -m pytest

lint: $(VENV)/.installed-stamp
	$(PY) -m ruff check .

docs: $(VENV)/.installed-stamp
	$(VENV)/bin/mkdocs build --strict
