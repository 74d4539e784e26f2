# hpc.balance — every target installs what it needs (Debian 12, run as root) and is safe to run again.
#
#   make demo            build the local lab, run playbooks/site.yml on it, print the audit, tear the lab down (KEEP=1 keeps it)
#   make test            everything CI runs: lint, sanity, units, package tests, molecule scenarios
#   eval "$(make -s env)"   use ansible-playbook / ansible-doc / molecule from this checkout in your shell
#
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV := $(ROOT)/.venv
BIN := $(VENV)/bin
PY := $(BIN)/python
WORK := $(ROOT)/.work
# The checkout seen as an installed collection: <COLLECTIONS>/ansible_collections/hpc/balance -> $(ROOT)
COLLECTIONS := $(VENV)/collections
COLLECTION_LINK := $(COLLECTIONS)/ansible_collections/hpc/balance
PREFIX ?= hb
LAB ?= netns
LAB_STATE := $(ROOT)/.lab/$(PREFIX)
SCENARIO ?=
REPORT_DIR ?= $(ROOT)/report

# Debian packages by name (requirements/apt.txt; floors only where behaviour depends on a version) and the versions
# last tested (requirements/apt-tested.txt): `make setup` installs the first and prints differences from the second.
APT_REQUIREMENTS := $(ROOT)/requirements/apt.txt
APT_TESTED := $(ROOT)/requirements/apt-tested.txt
APT_STAMP := $(WORK)/stamps/apt.$(shell cat $(APT_REQUIREMENTS) | md5sum | cut -c1-12)
VENV_STAMP := $(WORK)/stamps/venv.$(shell cat $(ROOT)/requirements/*.txt $(ROOT)/packages/moe_balance/pyproject.toml 2>/dev/null | md5sum | cut -c1-12)
GET_PIP := $(WORK)/home/.ansible/test/cache/get_pip_24_2.py

# Everything below runs with its own HOME so nothing leaks into the user's home directory.
TOOL_ENV := \
	HOME=$(WORK)/home \
	XDG_CACHE_HOME=$(WORK)/cache \
	PATH=$(BIN):$$PATH \
	ANSIBLE_HOME=$(WORK)/ansible \
	ANSIBLE_COLLECTIONS_PATH=$(COLLECTIONS) \
	ANSIBLE_ROLES_PATH=$(ROOT)/roles \
	ANSIBLE_LOCAL_TEMP=$(WORK)/ansible/tmp \
	ANSIBLE_FORCE_COLOR=0 \
	ANSIBLE_NOCOWS=1 \
	ANSIBLE_STDOUT_CALLBACK=ansible.builtin.default \
	ANSIBLE_CALLBACK_RESULT_FORMAT=yaml \
	ANSIBLE_SSH_CONTROL_PATH_DIR=$(WORK)/cp \
	PIP_DISABLE_PIP_VERSION_CHECK=1 \
	PYTHONDONTWRITEBYTECODE=1

.PHONY: help setup apt venv env lint sanity units moe-test molecule test demo lab-up lab-down lab-status lab-image bench clean

help:
	@sed -n '2,7p' $(ROOT)/Makefile | sed 's/^# \{0,1\}//'

## ---------------------------------------------------------------- setup
setup: apt venv

apt: $(APT_STAMP)
$(APT_STAMP):
	@mkdir -p $(dir $@)
	@bash $(ROOT)/tools/apt_ensure.sh $(APT_REQUIREMENTS) $(APT_TESTED)
	@touch $@

venv: $(VENV_STAMP) $(COLLECTION_LINK) $(GET_PIP)
$(VENV_STAMP): $(APT_STAMP)
	@mkdir -p $(dir $@)
	@[ -x $(PY) ] || python3 -m venv $(VENV)
	@echo "setup: installing pinned Python packages into .venv (requirements/dev.txt, requirements/moe.txt)" >&2
	@$(TOOL_ENV) $(BIN)/pip install -q -c $(ROOT)/requirements/constraints.txt -r $(ROOT)/requirements/dev.txt >&2 2> >(grep -v "is ignored: it is neither" >&2)
	@if [ -f $(ROOT)/requirements/moe.txt ]; then $(TOOL_ENV) $(BIN)/pip install -q -c $(ROOT)/requirements/constraints.txt -r $(ROOT)/requirements/moe.txt >&2 2> >(grep -v "is ignored: it is neither" >&2); fi
	@if [ -f $(ROOT)/packages/moe_balance/pyproject.toml ]; then $(TOOL_ENV) $(BIN)/pip install -q --no-deps --no-build-isolation -e $(ROOT)/packages/moe_balance >&2 2> >(grep -v "is ignored: it is neither" >&2); fi
	@$(BIN)/pip check >/dev/null
	@touch $@

$(COLLECTION_LINK):
	@mkdir -p $(dir $@)
	@ln -sfn $(ROOT) $@

# ansible-test fetches a pip bootstrap script from a host that clusters and this lab cannot reach; this stand-in
# installs the same pip release from the configured package index instead.
$(GET_PIP): $(ROOT)/tests/sanity/get_pip_offline.py
	@mkdir -p $(dir $@)
	@cp $< $@

env: venv
	@echo 'export PATH="$(BIN):$$PATH"'
	@echo 'export ANSIBLE_COLLECTIONS_PATH="$(COLLECTIONS)"'
	@echo 'export ANSIBLE_ROLES_PATH="$(ROOT)/roles"'
	@echo 'export ANSIBLE_CALLBACK_RESULT_FORMAT=yaml'

## ---------------------------------------------------------------- checks
lint: venv
	@echo "== ruff"
	@$(TOOL_ENV) ruff check $(ROOT)
	@echo "== ansible-lint (production profile)"
	@cd $(ROOT) && $(TOOL_ENV) ansible-lint --profile production --offline -q
	@echo "== PowerShell parse check (tree-sitter-powershell)"
	@if [ -f $(ROOT)/tests/ps1/check_ps1_parse.py ]; then $(TOOL_ENV) $(PY) $(ROOT)/tests/ps1/check_ps1_parse.py $(ROOT); fi

sanity: venv
	@rm -rf $(WORK)/sanity && mkdir -p $(WORK)/sanity/ansible_collections/hpc/balance
	@cd $(ROOT) && git ls-files -co --exclude-standard -z | grep -zv '^packages/' \
		| rsync -a --from0 --files-from=- ./ $(WORK)/sanity/ansible_collections/hpc/balance/
	@# A git repository of its own, or ansible-test would list files from the enclosing checkout (where .work is ignored).
	@cd $(WORK)/sanity/ansible_collections/hpc/balance && git init -q && git add -A
	@cd $(WORK)/sanity/ansible_collections/hpc/balance && $(TOOL_ENV) ansible-test sanity --local --python 3.11 --color no

units: venv
	@# pytest-ansible keeps a collections/ tree of links that goes stale when a top-level folder is added.
	@rm -rf $(ROOT)/collections
	@cd $(ROOT) && $(TOOL_ENV) PYTHONPATH=$(COLLECTIONS) $(PY) -m pytest -q -p no:cacheprovider \
		$$(for d in tests/unit tests/ps1 tests/playbooks tests/lab/uml; do [ -d $$d ] && echo $$d; done)

moe-test: venv
	@if [ -d $(ROOT)/packages/moe_balance/tests ]; then \
		cd $(ROOT)/packages/moe_balance && $(TOOL_ENV) TRITON_INTERPRET=1 $(PY) -m pytest -q -p no:cacheprovider tests; \
	else echo "moe-test: no package tests yet"; fi

molecule: venv apt
	@cd $(ROOT) && for s in $${SCENARIO:-$$(ls extensions/molecule | grep -v '^default$$' )}; do \
		[ -f extensions/molecule/$$s/molecule.yml ] || continue; \
		echo "== molecule test -s $$s"; \
		$(TOOL_ENV) LAB_PREFIX=$(PREFIX)m molecule test -s $$s || exit 1; \
	done

test: lint sanity units moe-test molecule
	@echo "make test: all checks passed"

bench: venv
	@cd $(ROOT)/packages/moe_balance && for b in benchmarks/*.py; do echo "== $$b"; $(TOOL_ENV) $(PY) $$b; done
	@cd $(ROOT) && $(TOOL_ENV) PYTHONPATH=$(COLLECTIONS) $(PY) tests/perf/bench_ipvs_spread.py

## ---------------------------------------------------------------- lab and demo
lab-up: setup
	@case "$(LAB)" in netns|uml) ;; *) echo "lab-up: LAB=$(LAB) is not a lab flavour (netns, uml)" >&2; exit 2;; esac
	@python3 $(ROOT)/tests/lab/lab.py up --prefix $(PREFIX) --state-dir $(LAB_STATE) --flavour $(LAB)

# Build (or find in its cache) the real-kernel guest image without booting anything.
lab-image: apt
	@python3 $(ROOT)/tests/lab/uml/uml_lab.py image

lab-down:
	@python3 $(ROOT)/tests/lab/lab.py down --prefix $(PREFIX) --state-dir $(LAB_STATE)

lab-status:
	@python3 $(ROOT)/tests/lab/lab.py status --prefix $(PREFIX) --state-dir $(LAB_STATE)

demo: setup
	@$(TOOL_ENV) PREFIX=$(PREFIX) LAB_STATE=$(LAB_STATE) REPORT_DIR=$(REPORT_DIR) KEEP=$${KEEP:-0} \
		bash $(ROOT)/tools/demo.sh

clean: lab-down
	rm -rf $(WORK) $(ROOT)/tests/output $(ROOT)/collections
