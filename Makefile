# hpc.balance — every target installs what it needs (Debian 12, run as root) and is safe to run again.
# `make help` lists the targets; the two that matter first:
#
#   make demo            build the local lab, run playbooks/site.yml on it, print the audit, tear the lab down (KEEP=1 keeps it)
#   make test            everything CI runs: lint, sanity, Galaxy's import checks, units, package tests, execution
#                        environment, molecule scenarios
#   make check           the edit-test loop: lint, sanity, Galaxy's import checks, units, package tests, quick
#                        benchmarks (a few minutes)
#
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV := $(ROOT)/.venv
BIN := $(VENV)/bin
PY := $(BIN)/python
WORK := $(ROOT)/.work
# lint and sanity need no torch, no Debian package and no root: on a checkout without the full environment they build
# and use a light one of their own (requirements/tools.txt, a part of dev.txt); where `make setup` built the full one
# (make test does first), they use that instead of installing the same tools twice.
TOOLS_VENV := $(ROOT)/.venv-tools
TOOLS_BIN := $(TOOLS_VENV)/bin
TOOLS_COLLECTION_LINK := $(TOOLS_VENV)/collections/ansible_collections/hpc/balance
# galaxy-check's tools (galaxy-importer, antsibull-docs) pin older libraries than the rest: an environment of their own,
# kept with the other generated state in .work/ (which no linter, build or tree walk reads).
GALAXY_VENV := $(WORK)/venv-galaxy
GALAXY_BIN := $(GALAXY_VENV)/bin
GALAXY_WORK := $(WORK)/galaxy
# The checkout seen as an installed collection: <COLLECTIONS>/ansible_collections/hpc/balance -> $(ROOT)
COLLECTIONS := $(VENV)/collections
COLLECTION_LINK := $(COLLECTIONS)/ansible_collections/hpc/balance
PREFIX ?= hb
# The lab flavour of demo and lab-up: uml = directors and real servers on real-kernel guests (IPVS), netns = the quick
# network-namespace hosts only (VRRP, no IPVS).
LAB ?= uml
LAB_STATE := $(ROOT)/.lab/$(PREFIX)
SCENARIO ?=
REPORT_DIR ?= $(ROOT)/report

# Debian packages by name (requirements/apt.txt; floors only where behaviour depends on a version) and the versions
# last tested (requirements/apt-tested.txt): `make setup` installs the first and prints differences from the second.
APT_REQUIREMENTS := $(ROOT)/requirements/apt.txt
APT_TESTED := $(ROOT)/requirements/apt-tested.txt
APT_STAMP := $(WORK)/stamps/apt.$(shell cat $(APT_REQUIREMENTS) | md5sum | cut -c1-12)
# Only the pip files: a new tested Debian version (apt-tested.txt) must not reinstall the virtualenv, nor a new pin of
# galaxy-check's own environment (GALAXY_VENV) or of a further ansible-core line (CORE_MATRIX).
GALAXY_REQUIREMENTS := $(ROOT)/requirements/galaxy.txt $(ROOT)/requirements/galaxy-constraints.txt
CORE_REQUIREMENTS := $(wildcard $(ROOT)/requirements/matrix-*.txt)
VENV_STAMP := $(WORK)/stamps/venv.$(shell cat $(filter-out $(APT_REQUIREMENTS) $(APT_TESTED) $(GALAXY_REQUIREMENTS) $(CORE_REQUIREMENTS),$(wildcard $(ROOT)/requirements/*.txt)) $(ROOT)/packages/moe_balance/pyproject.toml 2>/dev/null | md5sum | cut -c1-12)
TOOLS_STAMP := $(WORK)/stamps/tools.$(shell cat $(addprefix $(ROOT)/requirements/,controller.txt tools.txt constraints.txt) | md5sum | cut -c1-12)
GALAXY_STAMP := $(WORK)/stamps/galaxy.$(shell cat $(GALAXY_REQUIREMENTS) | md5sum | cut -c1-12)
# ansible-test's pip bootstrap script, placed under the name the installed ansible-test asks for: placed again when
# the script or the ansible-core pin (controller.txt, which brings ansible-test and its pip pin) changes.
GET_PIP_STAMP := $(WORK)/stamps/get-pip.$(shell cat $(ROOT)/tests/sanity/get_pip_offline.py $(ROOT)/requirements/controller.txt | md5sum | cut -c1-12)
# Each step's wall time, printed as a table at the end of make test and make check (tools/step_times.py).
STEP_TIMES := python3 $(ROOT)/tools/step_times.py

# The test folders and scenarios `make test` runs. A missing one fails the build: a renamed folder must not turn CI
# green with fewer tests.
UNIT_TEST_DIRS := tests/unit tests/ps1 tests/playbooks tests/lab
MOE_TEST_DIR := packages/moe_balance/tests
# The support matrix: the ansible-core lines CI tests besides .venv's 2.19 (requirements/controller.txt). Each line has
# a virtualenv of its own, .work/venv-core-X.Y (requirements/matrix-X.Y.txt), where sanity-X.Y runs ansible-test
# sanity as make sanity does and units-X.Y runs CORE_UNIT_TEST_DIRS. ansible-core 2.20 and later require Python 3.12
# or later on the controller, and Debian 12 has 3.11 only: CORE_PYTHON is the first python3.12 found in /usr/bin,
# /usr/local/bin or pyenv's versions (this machine image has pyenv's 3.12); name another with CORE_PYTHON=PATH.
CORE_MATRIX := 2.20 2.21
CORE_PYTHON ?= $(firstword $(wildcard /usr/bin/python3.12 /usr/local/bin/python3.12 \
	$(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/3.12*/bin/python3.12))
CORE_UNIT_TEST_DIRS := tests/unit
CORE_STEPS := $(foreach line,$(CORE_MATRIX),sanity-$(line) units-$(line))
# pytest-xdist workers for units and moe-test (one per core of a 2-core CI machine); TEST_WORKERS=0 runs in-process.
TEST_WORKERS ?= 2
PS1_PARSE_CHECK := tests/ps1/check_ps1_parse.py
MOLECULE_SCENARIOS := default lvs-netns lvs-uml gpu-moe
# The steps of make test and make check, in order (molecule:NAME is one scenario). The bg: steps need only CPU and have
# no deadline: they run one after another from the start, beside the foreground, at the lowest priority, in the time
# the scenarios spend waiting on real time (tools/step_times.py BackgroundChain); make test waits for them before its
# table, and a failed one stops the foreground at its next step. The foreground keeps what has a deadline: the package
# tests' gloo ranks and gpu-check's step limits, and the scenarios' VRRP timing, sessions and reboots. The table's busy
# column shows the cores busy for 90 % of a run on 2 cores: CPU bounds make test there. A second background chain (the
# netns scenarios slowed by half) and a chain in a scheduling group of its own at niceness 19 (starved until the
# scenarios ended) both made the run longer than this one chain in the foreground's session.
BACKGROUND_STEPS := lint sanity units bench-quick galaxy-check $(CORE_STEPS)
TEST_STEPS := test-setup test-folders $(addprefix bg:,$(BACKGROUND_STEPS)) moe-test gpu-check ee \
	$(addprefix molecule:,$(MOLECULE_SCENARIOS))
# make check runs in two lanes at one priority, so that both cores stay busy: lint, sanity and Galaxy's import
# checks (one process at a time, mostly) beside the units, the package tests and the quick benchmarks (pytest-xdist).
CHECK_STEPS := test-folders $(addprefix beside:,lint sanity galaxy-check) units moe-test bench-quick
require = @for p in $(1); do [ -e "$(ROOT)/$$p" ] || { echo "make: $$p is missing; it is listed in the Makefile and \
	make test must not run without it (update the Makefile if it moved)" >&2; exit 1; }; done

# MITOGEN=1 runs every playbook of the demo and the molecule scenarios with mitogen's strategy (PyPI mitogen, pinned
# in requirements/dev.txt): fewer round trips per task. Never required; off by default. mitogen checks host keys by
# Ansible's host_key_checking only (the lab's ssh arguments turn ssh's own check off), so the lab turns it off too.
MITOGEN ?= 0
MITOGEN_STRATEGY_DIR = $(shell $(PY) -c 'import ansible_mitogen, os; print(os.path.dirname(ansible_mitogen.__file__))')/plugins/strategy
MITOGEN_ENV = $(if $(filter 1,$(MITOGEN)),ANSIBLE_STRATEGY_PLUGINS=$(MITOGEN_STRATEGY_DIR) ANSIBLE_STRATEGY=mitogen_linear \
	ANSIBLE_HOST_KEY_CHECKING=False)
# Everything below runs with its own HOME so nothing leaks into the user's home directory.
TOOL_ENV = \
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
	PYTHONDONTWRITEBYTECODE=1 \
	$(MITOGEN_ENV)
# What lint and sanity run with: the same, with their environment's tools first (see TOOLS_VENV).
LINT_VENV := $(if $(wildcard $(VENV_STAMP)),$(VENV),$(TOOLS_VENV))
LINT_BIN := $(LINT_VENV)/bin
LINT_VENV_TARGET := $(if $(wildcard $(VENV_STAMP)),venv,tools-venv)
LIGHT_ENV = $(TOOL_ENV) \
	PATH=$(LINT_BIN):$$PATH \
	ANSIBLE_COLLECTIONS_PATH=$(LINT_VENV)/collections
# What galaxy-check runs with: its own environment, and only the collection it installed from the tarball.
GALAXY_ENV = $(TOOL_ENV) \
	PATH=$(GALAXY_BIN):$$PATH \
	ANSIBLE_COLLECTIONS_PATH=$(GALAXY_WORK)/collections

.PHONY: help setup test-setup apt apt-record venv tools-venv galaxy-venv env lint sanity galaxy-check docs-html units moe-test ee ee-image ee-audit molecule test-folders test check gpu-check \
	bench bench-quick demo lab-up \
	lab-down lab-status lab-image clean

help: ## list the targets
	@echo "hpc.balance: make demo shows the product on the local lab, make test runs everything CI runs."
	@grep -E '^[a-z][a-z-]*:.*## ' $(ROOT)/Makefile | sed -E 's/^([a-z-]+):.*## (.*)/  make \1\t\2/' | expand -t 24

## ---------------------------------------------------------------- setup
setup: apt venv ## Debian packages by name, then the pinned virtualenv in .venv/

# make test's first step: setup, and beside it the environments of the background steps that do not need .venv
# (galaxy-check's, each further ansible-core line's). pip's downloads and unpacking keep one core of two busy (setup
# alone: 50 % of 2 cores); the chain's steps then start with their environment built.
CORE_VENV_STAMPS := $(foreach line,$(CORE_MATRIX),$(WORK)/venv-core-$(line)/stamp)
test-setup: apt
	@$(MAKE) --no-print-directory -j 4 venv galaxy-venv $(CORE_VENV_STAMPS)

apt: $(APT_STAMP) ## Debian packages of requirements/apt.txt; notes where they differ from requirements/apt-tested.txt

apt-record: apt ## write the installed Debian versions into requirements/apt-tested.txt (after a green make test)
	@bash $(ROOT)/tools/apt_ensure.sh --record $(APT_REQUIREMENTS) $(APT_TESTED)
	@git -C $(ROOT) diff --stat -- $(APT_TESTED)

$(APT_STAMP):
	@mkdir -p $(dir $@)
	@bash $(ROOT)/tools/apt_ensure.sh $(APT_REQUIREMENTS) $(APT_TESTED)
	@touch $@

venv: $(VENV_STAMP) $(COLLECTION_LINK) ## the pinned Python packages in .venv/
$(VENV_STAMP): $(APT_STAMP)
	@mkdir -p $(dir $@)
	@[ -x $(PY) ] || python3 -m venv $(VENV)
	@echo "setup: installing pinned Python packages into .venv (requirements/dev.txt, requirements/moe.txt)" >&2
	@$(TOOL_ENV) $(BIN)/pip install -q -c $(ROOT)/requirements/constraints.txt -r $(ROOT)/requirements/dev.txt >&2
	@$(TOOL_ENV) $(BIN)/pip install -q -c $(ROOT)/requirements/constraints.txt -r $(ROOT)/requirements/moe.txt >&2
	@$(TOOL_ENV) $(BIN)/pip install -q --no-deps --no-build-isolation -e $(ROOT)/packages/moe_balance >&2
	@$(BIN)/pip check >/dev/null
	@touch $@

$(COLLECTION_LINK) $(TOOLS_COLLECTION_LINK):
	@mkdir -p $(dir $@)
	@ln -sfn $(ROOT) $@

tools-venv: $(TOOLS_STAMP) $(TOOLS_COLLECTION_LINK) ## the light environment of lint and sanity in .venv-tools/
$(TOOLS_STAMP):
	@mkdir -p $(dir $@)
	@[ -x $(TOOLS_BIN)/python ] || python3 -m venv $(TOOLS_VENV)
	@echo "setup: installing the lint and sanity tools into .venv-tools (requirements/tools.txt)" >&2
	@$(TOOL_ENV) $(TOOLS_BIN)/pip install -q -c $(ROOT)/requirements/constraints.txt -r $(ROOT)/requirements/tools.txt >&2
	@$(TOOLS_BIN)/pip check >/dev/null
	@touch $@

galaxy-venv: $(GALAXY_STAMP) ## galaxy-check's environment in .work/venv-galaxy/ (requirements/galaxy.txt)
$(GALAXY_STAMP):
	@mkdir -p $(dir $@)
	@[ -x $(GALAXY_BIN)/python ] || python3 -m venv $(GALAXY_VENV)
	@echo "setup: installing galaxy-importer and antsibull-docs into .work/venv-galaxy (requirements/galaxy.txt)" >&2
	@$(TOOL_ENV) $(GALAXY_BIN)/pip install -q -c $(ROOT)/requirements/galaxy-constraints.txt \
		-r $(ROOT)/requirements/galaxy.txt >&2
	@$(GALAXY_BIN)/pip check >/dev/null
	@touch $@

# ansible-test fetches a pip bootstrap script from a host that clusters and this lab cannot reach; this stand-in
# installs the same pip release from the configured package index instead.
$(GET_PIP_STAMP): | $(LINT_VENV_TARGET)
	@$(TOOL_ENV) $(LINT_BIN)/python $(ROOT)/tests/sanity/get_pip_offline.py --place $(WORK)/home/.ansible/test/cache
	@touch $@

env: venv ## print the exports that use this checkout's tools: eval "$(make -s env)" (MITOGEN=1 adds mitogen's)
	@echo 'export PATH="$(BIN):$$PATH"'
	@echo 'export ANSIBLE_COLLECTIONS_PATH="$(COLLECTIONS)"'
	@echo 'export ANSIBLE_ROLES_PATH="$(ROOT)/roles"'
	@echo 'export ANSIBLE_CALLBACK_RESULT_FORMAT=yaml'
	@$(if $(filter 1,$(MITOGEN)),echo 'export ANSIBLE_STRATEGY_PLUGINS="$(MITOGEN_STRATEGY_DIR)" \
		ANSIBLE_STRATEGY=mitogen_linear ANSIBLE_HOST_KEY_CHECKING=False',true)

## ---------------------------------------------------------------- checks
# mypy (mypy.ini) on plugins/ as the environment's collection link shows it, so that its ansible_collections.hpc.balance
# imports resolve to this checkout, and on the package with its tests and benchmarks.
MYPY_PATHS = $(notdir $(LINT_VENV))/collections/ansible_collections/hpc/balance/plugins \
	$(addprefix packages/moe_balance/,src tests benchmarks)

lint: $(LINT_VENV_TARGET) ## ruff, mypy, ansible-lint (production profile), PowerShell parse check
	$(call require,$(PS1_PARSE_CHECK))
	@echo "== ruff"
	@$(LIGHT_ENV) ruff check $(ROOT)
	@echo "== mypy"
	@cd $(ROOT) && $(LIGHT_ENV) MYPYPATH=$(LINT_VENV)/collections mypy $(MYPY_PATHS)
	@echo "== ansible-lint (production profile)"
	@cd $(ROOT) && $(LIGHT_ENV) ansible-lint --profile production --offline -q
	@echo "== PowerShell parse check (tree-sitter-powershell)"
	@$(LIGHT_ENV) $(LINT_BIN)/python $(ROOT)/$(PS1_PARSE_CHECK) $(ROOT)

# ansible-test sanity on a copy of the collection in $(1) (packages/ included), run with the environment $(2) under
# Python $(3). The copy is a git repository of its own, or ansible-test would list files from the enclosing checkout
# (where .work is ignored).
define sanity_run
	@rm -rf $(1) && mkdir -p $(1)/ansible_collections/hpc/balance
	@cd $(ROOT) && git ls-files -co --exclude-standard -z \
		| tar --null -T - -cf - | tar -xf - -C $(1)/ansible_collections/hpc/balance
	@cd $(1)/ansible_collections/hpc/balance && git init -q && git add -A
	@cd $(1)/ansible_collections/hpc/balance && $(2) ansible-test sanity --local --python $(3) --color no
endef

sanity: $(LINT_VENV_TARGET) $(GET_PIP_STAMP) ## ansible-test sanity on a copy of the collection (packages/ included)
	$(call sanity_run,$(WORK)/sanity,$(LIGHT_ENV),3.11)

# A further line of the support matrix (CORE_MATRIX): its virtualenv, built anew when its pins change. ansible-core
# comes from requirements/matrix-X.Y.txt, everything else from constraints.txt less its ansible-core pin; ansible-test's
# pip bootstrap stand-in is placed for the pip release this ansible-test pins.
$(WORK)/venv-core-%/stamp: $(ROOT)/requirements/matrix-%.txt $(ROOT)/requirements/matrix-common.txt \
		$(ROOT)/requirements/constraints.txt $(ROOT)/tests/sanity/get_pip_offline.py
	@[ -n "$(CORE_PYTHON)" ] || { echo "make: ansible-core $* needs Python 3.12 or later on the controller and no" \
		"python3.12 was found; name one with CORE_PYTHON=PATH" >&2; exit 1; }
	@echo "setup: installing ansible-core $* into $(@D) with $(CORE_PYTHON) (requirements/matrix-$*.txt)" >&2
	@rm -rf $(@D) && $(CORE_PYTHON) -m venv $(@D)
	@grep -v '^ansible-core==' $(ROOT)/requirements/constraints.txt > $(@D)/constraints.txt
	@$(TOOL_ENV) $(@D)/bin/pip install -q -c $(@D)/constraints.txt -r $< >&2
	@$(@D)/bin/pip check >/dev/null
	@mkdir -p $(@D)/collections/ansible_collections/hpc && ln -sfn $(ROOT) $(@D)/collections/ansible_collections/hpc/balance
	@$(TOOL_ENV) $(@D)/bin/python $(ROOT)/tests/sanity/get_pip_offline.py --place $(WORK)/home/.ansible/test/cache
	@touch $@

CORE_ENV = $(TOOL_ENV) PATH=$(WORK)/venv-core-$*/bin:$$PATH ANSIBLE_COLLECTIONS_PATH=$(WORK)/venv-core-$*/collections
CORE_VERSIONS = $(WORK)/venv-core-$*/bin/python -c 'import sys, ansible; \
	print("== ansible-core %s on Python %s" % (ansible.__version__, sys.version.split()[0]))'
.PHONY: core-matrix $(addprefix sanity-,$(CORE_MATRIX)) $(addprefix units-,$(CORE_MATRIX))
core-matrix: $(CORE_STEPS) ## sanity and tests/unit on each further ansible-core line (CORE_MATRIX; make test runs them)
$(addprefix sanity-,$(CORE_MATRIX)): sanity-%: $(WORK)/venv-core-%/stamp
	@$(CORE_VERSIONS)
	$(call sanity_run,$(WORK)/sanity-$*,$(CORE_ENV),$$($(WORK)/venv-core-$*/bin/python -c \
		'import sys; print("%d.%d" % sys.version_info[:2])'))
$(addprefix units-,$(CORE_MATRIX)): units-%: $(WORK)/venv-core-%/stamp
	$(call require,$(CORE_UNIT_TEST_DIRS))
	@$(CORE_VERSIONS)
	@rm -rf $(ROOT)/collections
	@cd $(ROOT) && $(CORE_ENV) PYTHONPATH=$(WORK)/venv-core-$*/collections $(WORK)/venv-core-$*/bin/python -m pytest \
		-q -p no:cacheprovider -n $(TEST_WORKERS) $(CORE_UNIT_TEST_DIRS)

# Galaxy's import on the built tarball: galaxy-importer (ansible-doc on every plugin, ansible-lint, the metadata; its
# docker-only ansible-test step is make sanity's job) and antsibull-docs lint-collection-docs --plugin-docs on the
# tarball installed (the docs pages Galaxy and docs.ansible.com render). The importer exits 0 on its own errors (a
# plugin ansible-doc cannot read drops every plugin's docs): any ERROR line fails the target; warnings are printed.
galaxy-check: $(GALAXY_STAMP) ## galaxy-importer and antsibull-docs lint on the built tarball, as Galaxy imports it
	@rm -rf $(GALAXY_WORK) && mkdir -p $(GALAXY_WORK)/dist $(GALAXY_WORK)/collections
	@cd $(ROOT) && $(GALAXY_ENV) ansible-galaxy collection build --output-path $(GALAXY_WORK)/dist >/dev/null
	@cd $(GALAXY_WORK) && $(GALAXY_ENV) ansible-galaxy collection install --no-deps -p collections dist/*.tar.gz >/dev/null
	@# The two run side by side; each one's output is printed after both have ended.
	@cd $(GALAXY_WORK)/collections/ansible_collections/hpc/balance && { $(GALAXY_ENV) antsibull-docs \
		lint-collection-docs --plugin-docs --validate-collection-refs all --disallow-unknown-collection-refs . \
		> $(GALAXY_WORK)/antsibull-docs.log 2>&1; echo $$? > $(GALAXY_WORK)/antsibull-docs.rc; } & \
	cd $(GALAXY_WORK) && $(GALAXY_ENV) GALAXY_IMPORTER_CONFIG=$(ROOT)/tools/galaxy-importer.cfg \
		python -m galaxy_importer.main dist/*.tar.gz > importer.log 2>&1 || echo $$? > importer.rc; wait
	@echo "== galaxy-importer $$(ls $(GALAXY_WORK)/dist) (full log: .work/galaxy/importer.log)"
	@awk '/^(WARNING|ERROR):/ && !seen[$$0]++' $(GALAXY_WORK)/importer.log
	@echo "galaxy-importer: $$(awk '/^ERROR:/ && !seen[$$0]++' $(GALAXY_WORK)/importer.log | wc -l) error(s)," \
		"$$(awk '/^WARNING:/ && !seen[$$0]++' $(GALAXY_WORK)/importer.log | wc -l) warning(s)"
	@echo "== antsibull-docs lint-collection-docs --plugin-docs"
	@cat $(GALAXY_WORK)/antsibull-docs.log
	@[ ! -e $(GALAXY_WORK)/importer.rc ] && ! grep -q '^ERROR:' $(GALAXY_WORK)/importer.log \
		&& grep -q '^Importer processing completed successfully' $(GALAXY_WORK)/importer.log \
		|| { echo "galaxy-check: galaxy-importer failed (see above)" >&2; exit 1; }
	@[ "$$(cat $(GALAXY_WORK)/antsibull-docs.rc)" = 0 ] \
		|| { echo "galaxy-check: antsibull-docs lint-collection-docs failed (see above)" >&2; exit 1; }

# The collection's docs site as docs.ansible.com lays a collection out: antsibull-docs sphinx-init on the tarball
# installed (as galaxy-check installs it), its generated build.sh (antsibull-docs collection, then Sphinx with its
# Ansible theme), then tests/docs reads the HTML: no error page, every role's options as its argument_specs declares
# them, and no Sphinx warning but the references to docs.ansible.com that need its inventory (unreachable offline).
# 35 to 40 s on an idle 2-core machine (build.sh 24 s of it), more than make test can spend: run it by hand after
# a docs change; make check and make test do not. Open .work/docs/site/build/html.
DOCS_WORK := $(WORK)/docs
docs-html: $(GALAXY_STAMP) venv ## the collection's docs site (antsibull-docs + Sphinx) in .work/docs/site/build/html, checked
	@rm -rf $(DOCS_WORK) && mkdir -p $(DOCS_WORK)/dist $(DOCS_WORK)/collections $(DOCS_WORK)/site
	@chmod 755 $(DOCS_WORK)/site
	@cd $(ROOT) && $(GALAXY_ENV) ansible-galaxy collection build --output-path $(DOCS_WORK)/dist >/dev/null
	@cd $(DOCS_WORK) && $(GALAXY_ENV) ANSIBLE_COLLECTIONS_PATH=$(DOCS_WORK)/collections \
		ansible-galaxy collection install --no-deps -p collections dist/*.tar.gz >/dev/null
	@cd $(DOCS_WORK) && $(GALAXY_ENV) ANSIBLE_COLLECTIONS_PATH=$(DOCS_WORK)/collections \
		antsibull-docs sphinx-init --use-current --dest-dir site hpc.balance >/dev/null
	@# build.sh runs Sphinx with -W: offline its references to docs.ansible.com fail it; the test judges the log.
	@cd $(DOCS_WORK) && { $(GALAXY_ENV) ANSIBLE_COLLECTIONS_PATH=$(DOCS_WORK)/collections site/build.sh \
		> build.log 2>&1 && echo 0 > build.rc || echo $$? > build.rc; }
	@echo "== antsibull-docs + Sphinx: .work/docs/site/build/html (log: .work/docs/build.log, build.sh exit $$(cat $(DOCS_WORK)/build.rc))"
	@cd $(ROOT) && $(TOOL_ENV) DOCS_SITE=$(DOCS_WORK)/site $(PY) -m pytest -q -p no:cacheprovider tests/docs

units: venv ## unit tests of plugins, roles, PowerShell, playbooks and the lab
	$(call require,$(UNIT_TEST_DIRS))
	@# pytest-ansible keeps a collections/ tree of links that goes stale when a top-level folder is added.
	@rm -rf $(ROOT)/collections
	@cd $(ROOT) && $(TOOL_ENV) PYTHONPATH=$(COLLECTIONS) $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) \
		$(UNIT_TEST_DIRS)

moe-test: venv ## the moe_balance package's tests (Triton kernels through the interpreter)
	$(call require,$(MOE_TEST_DIR))
	@cd $(ROOT)/packages/moe_balance && $(TOOL_ENV) TRITON_INTERPRET=1 $(PY) -m pytest -q -p no:cacheprovider \
		-n $(TEST_WORKERS) tests

# The execution environment's build context: the collection tarball (its name from galaxy.yml) and
# `ansible-builder create`, which needs no container engine. Build the image with podman or docker (README.md).
ee: venv ## collection tarball into dist/ and the execution environment's build context in .work/ee/context
	@rm -rf $(ROOT)/dist $(WORK)/ee && mkdir -p $(ROOT)/dist
	@cd $(ROOT) && $(TOOL_ENV) ansible-galaxy collection build --output-path dist >/dev/null
	@cd $(ROOT) && $(TOOL_ENV) ansible-builder create -f execution-environment.yml --context $(WORK)/ee/context >/dev/null
	@# The context must carry exactly the tarball galaxy.yml names.
	@$(PY) -c 'import pathlib, sys, yaml; g = yaml.safe_load(open(sys.argv[1])); \
		want = "%s-%s-%s.tar.gz" % (g["namespace"], g["name"], g["version"]); \
		have = sorted(p.name for p in pathlib.Path(sys.argv[2]).glob("*.tar.gz")); \
		sys.exit(0 if have == [want] else "ee: the build context holds %s, not %s" % (have, want))' \
		$(ROOT)/galaxy.yml $(WORK)/ee/context/_build/collections
	@echo "ee: build context in $(WORK)/ee/context with $$(ls $(ROOT)/dist)"

# The execution environment built and run for real with podman on this machine, which reaches no container registry
# and no Ansible Galaxy: a local Debian 12 base image (tests/ee/local_base_image.sh) and a definition derived from the
# shipped one with its differences stated (tests/ee/local_definition.py). Not part of make test: the image takes
# 1.5 to 5.5 minutes from scratch on 2 cores, and ee-audit needs a running lab with the roles applied (README.md,
# "Running at scale"). Each build prunes the untagged layers of earlier builds (its own stay, as the next one's cache).
EE_VERSION = $(shell awk '/^version:/ {print $$2}' $(ROOT)/galaxy.yml)
EE_IMAGE ?= localhost/hpc-balance-ee:$(EE_VERSION)
EE_LOCAL_BASE := localhost/hpc-balance-ee-base:bookworm
EE_IMAGE_DIR := $(WORK)/ee-image
EE_AUDIT_DIR ?= $(WORK)/ee-audit
EE_ENV = CONTAINERS_CONF=$(ROOT)/tests/ee/containers.conf
EE_APT_STAMP = $(WORK)/stamps/apt-ee.$(shell cat $(ROOT)/tests/ee/apt.txt | md5sum | cut -c1-12)
$(EE_APT_STAMP):
	@mkdir -p $(dir $@)
	@bash $(ROOT)/tools/apt_ensure.sh $(ROOT)/tests/ee/apt.txt $(ROOT)/tests/ee/apt-tested.txt
	@touch $@

ee-image: ee $(EE_APT_STAMP) ## build the execution environment image with podman on a local Debian base (EE_IMAGE; not in make test)
	@start_s=$$(date +%s); \
	base=$$($(EE_ENV) bash $(ROOT)/tests/ee/local_base_image.sh $(EE_LOCAL_BASE)); \
	base_s=$$(( $$(date +%s) - start_s )); \
	$(TOOL_ENV) $(PY) $(ROOT)/tests/ee/local_definition.py --root $(ROOT) --base-image $$base \
		--collections-dir $$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ansible_collections \
		--out-dir $(EE_IMAGE_DIR) >/dev/null; \
	cd $(ROOT) && $(TOOL_ENV) $(EE_ENV) ansible-builder build -f $(EE_IMAGE_DIR)/execution-environment.yml \
		--context $(EE_IMAGE_DIR)/context -t $(EE_IMAGE) --container-runtime podman \
		--extra-build-cli-args '--network host' > $(EE_IMAGE_DIR)/build.log 2>&1 \
		|| { tail -n 40 $(EE_IMAGE_DIR)/build.log; echo "ee-image: ansible-builder build failed" >&2; exit 1; }; \
	$(EE_ENV) podman image prune -f --filter until=$$start_s >/dev/null; \
	echo "ee-image: $(EE_IMAGE), $$($(EE_ENV) podman image inspect --format '{{.Size}}' $(EE_IMAGE) \
		| awk '{printf "%d MB", $$1 / 1e6}'), built in $$(( $$(date +%s) - start_s )) s (base image $$base: $$base_s s)"

ee-audit: ee-image ## playbooks/audit.yml inside the image and outside against the running lab (PREFIX); verdicts side by side
	@$(TOOL_ENV) $(EE_ENV) ROOT=$(ROOT) PREFIX=$(PREFIX) LAB_STATE=$(LAB_STATE) EE_IMAGE=$(EE_IMAGE) \
		EE_AUDIT_DIR=$(EE_AUDIT_DIR) bash $(ROOT)/tests/ee/audit_inside_outside.sh

molecule: venv apt ## molecule scenarios on the local lab (SCENARIO=name for one)
	$(call require,$(addprefix extensions/molecule/,$(addsuffix /molecule.yml,$(MOLECULE_SCENARIOS))))
	@cd $(ROOT) && for s in $${SCENARIO:-$(MOLECULE_SCENARIOS)}; do \
		echo "== molecule test -s $$s"; \
		mkdir -p $(WORK)/logs; rm -rf $(ROOT)/.lab/$(PREFIX)m-consoles; \
		if ! $(TOOL_ENV) LAB_PREFIX=$(PREFIX)m molecule test -s $$s 2>&1 | tee $(WORK)/logs/molecule-$$s.log \
				| $(STEP_TIMES) phases $${STEP_TIMES_TSV:-/dev/null} $$s; then \
			for c in $(ROOT)/.lab/$(PREFIX)m-consoles/*.log; do [ -f "$$c" ] || continue; \
				echo "== last 15 lines of $$c (the guest's console, kept by lab down)"; tail -n 15 "$$c"; done; \
			echo "== molecule test -s $$s failed; its failed tasks (full log: .work/logs/molecule-$$s.log):"; \
			$(PY) tools/failed_tasks.py $(WORK)/logs/molecule-$$s.log \
				| tee $${STEP_FAILURE_SUMMARY:-/dev/null}; \
			exit 1; \
		fi; \
	done

test-folders: ## fail at once when a test folder, check or scenario that make test runs is missing
	$(call require,$(UNIT_TEST_DIRS) $(MOE_TEST_DIR) $(PS1_PARSE_CHECK))
	$(call require,$(addprefix extensions/molecule/,$(addsuffix /molecule.yml,$(MOLECULE_SCENARIOS))))

# One script for a GPU host (at most 5 minutes on one GPU): the kernel tests without the interpreter, the fused
# router against the eager Megatron formulas, the placement kernels; one JSON. Without a GPU (CI) it is a dry run on
# the CPU under TRITON_INTERPRET=1 (at most 2 minutes); GPU_CHECK_ARGS=--dry-run forces that on a GPU host too.
GPU_CHECK_ARGS ?=
GPU_CHECK_OUT ?= $(WORK)/gpu-check.json
gpu-check: venv ## the first-GPU check of moe_balance; a CPU dry run where there is no GPU; writes GPU_CHECK_OUT
	@cd $(ROOT)/packages/moe_balance && $(TOOL_ENV) $(PY) benchmarks/gpu_check.py $(GPU_CHECK_ARGS) --out $(GPU_CHECK_OUT)
	@echo "gpu-check: results in $(GPU_CHECK_OUT)"

# pip's resolver against PyPI for Python 3.10 to 3.13 on x86_64 and aarch64 (needs the network, so not in make test);
# a pythonX.Y missing from PATH is named with RESOLUTION_MATRIX_ARGS="--python 3.10=/path/to/python3.10".
.PHONY: resolution-matrix
resolution-matrix: ## resolve the gpu_moe role's pins and requirements/moe.txt per Python and machine (network)
	@$(TOOL_ENV) python3 $(ROOT)/tools/resolution_matrix.py --out $(WORK)/resolution-matrix.json $(RESOLUTION_MATRIX_ARGS)

test: ## everything CI runs; ends with a table of each step's wall time
	@$(STEP_TIMES) make $(WORK)/step-times-test.tsv $(TEST_STEPS)
	@echo "make test: all checks passed"

check: ## the edit-test loop (lint, sanity, Galaxy's import checks, units, package tests, quick benchmarks); ends with the time table
	@$(STEP_TIMES) make $(WORK)/step-times-check.tsv $(CHECK_STEPS)
	@echo "make check: all checks passed"

# The benchmarks: placement and router (package), ipvs_spread (plugins). gpu_check.py is a check, run by gpu-check.
BENCHMARKS := packages/moe_balance/benchmarks/placement.py packages/moe_balance/benchmarks/router.py \
	packages/moe_balance/benchmarks/expert_parallel.py \
	tests/perf/bench_ipvs_spread.py
bench: ## placement, router and ipvs_spread benchmarks (ratios against the named references)
bench-quick: BENCH_ARGS := --quick
bench-quick: ## every benchmark at its quick size, so none rots (make check and make test run it)
bench bench-quick: venv
	@for b in $(BENCHMARKS); do echo "== $$b $(BENCH_ARGS)"; cd $(ROOT) && $(TOOL_ENV) PYTHONPATH=$(COLLECTIONS) $(PY) $$b $(BENCH_ARGS); done

## ---------------------------------------------------------------- lab and demo
lab-up: setup ## bring the local lab up (LAB=uml or netns); the last line printed is its inventory
	@case "$(LAB)" in netns|uml) ;; *) echo "lab-up: LAB=$(LAB) is not a lab flavour (netns, uml)" >&2; exit 2;; esac
	@python3 $(ROOT)/tests/lab/lab.py up --prefix $(PREFIX) --state-dir $(LAB_STATE) --flavour $(LAB)

lab-image: apt ## build (or find in its cache) the real-kernel guest image without booting anything
	@python3 $(ROOT)/tests/lab/lab.py image

lab-down: ## remove the local lab (harmless when there is none)
	@python3 $(ROOT)/tests/lab/lab.py down --prefix $(PREFIX) --state-dir $(LAB_STATE)

lab-status: ## hosts, processes, sshd and guard counters of the local lab
	@python3 $(ROOT)/tests/lab/lab.py status --prefix $(PREFIX) --state-dir $(LAB_STATE)

demo: setup ## lab up (LAB=uml by default), site.yml, print the audit, lab down (KEEP=1 keeps it)
	@case "$(LAB)" in netns|uml) ;; *) echo "demo: LAB=$(LAB) is not a lab flavour (netns, uml)" >&2; exit 2;; esac
	@$(TOOL_ENV) PREFIX=$(PREFIX) LAB=$(LAB) LAB_STATE=$(LAB_STATE) REPORT_DIR=$(REPORT_DIR) KEEP=$${KEEP:-0} \
		bash $(ROOT)/tools/demo.sh

clean: lab-down ## remove the lab and every generated folder (the venv stays)
	rm -rf $(WORK) $(ROOT)/tests/output $(ROOT)/collections $(ROOT)/dist
