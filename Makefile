# Two commands on a fresh machine (Python 3.11 + pip): `make demo` and `make test`.
# A virtual environment is created in .venv unless one is already active (VIRTUAL_ENV).
PYTHON ?= python3
ENV_DIR := $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV),$(CURDIR)/.venv)
PY := $(ENV_DIR)/bin/python
# visdom 0.2.4 builds only with setuptools<81; PIP_CONSTRAINT reaches pip's isolated build environments.
export PIP_CONSTRAINT := $(CURDIR)/constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK := 1
WORKSPACE ?= $(CURDIR)/workspace
PYTEST_ARGS ?=

.PHONY: demo demo-1d test test-slow lint install install-test install-visdom install-vot-toolkit clean visdom visdom-assets

$(PY):
	$(PYTHON) -m venv $(ENV_DIR)

$(ENV_DIR)/.installed: $(PY) setup.py constraints.txt
	$(PY) -m pip install -e .
	touch $@

# The test extra includes the extras the tests use (visdom).
$(ENV_DIR)/.installed-test: $(ENV_DIR)/.installed
	$(PY) -m pip install -e '.[test]'
	touch $@

$(ENV_DIR)/.installed-visdom: $(ENV_DIR)/.installed
	$(PY) -m pip install -e '.[visdom]'
	touch $@

# The VOT toolkit in an environment of its own (it needs opencv-python, which must not meet our OpenCV wheel);
# the tests that run `vot evaluate` find it here.
VOT_ENV := $(CURDIR)/.venv-vot
$(VOT_ENV)/.installed: constraints.txt
	$(PYTHON) -m venv $(VOT_ENV)
	$(VOT_ENV)/bin/python -m pip install vot-toolkit attributee
	touch $@

install-vot-toolkit: $(VOT_ENV)/.installed
install: $(ENV_DIR)/.installed
install-test: $(ENV_DIR)/.installed-test
install-visdom: $(ENV_DIR)/.installed-visdom

demo: install
	$(PY) -m ltr.cli.demo --workspace $(WORKSPACE)

demo-1d: install
	$(PY) -m ltr.cli.demo --pipeline regression_1d --workspace $(WORKSPACE)

lint: install-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: lint install-vot-toolkit
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-slow: install-test install-vot-toolkit
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

# A local visdom server on http://127.0.0.1:8097, loopback only, page assets installed from the npm registry.
visdom: install-visdom
	$(PY) -m ltr.admin.visdom_server

visdom-assets: install-visdom
	$(PY) -m ltr.admin.visdom_server --install-assets-only

clean:
	rm -rf $(WORKSPACE) .pytest_cache .ruff_cache
