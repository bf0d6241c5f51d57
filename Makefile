# The two commands of the README: `make lab` and `make test`. Everything else is a helper for them.
# Setup is idempotent: .venv is (re)built only when pyproject.toml (the one place versions are pinned) changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PORT   ?= 8888
# The venv's tools come first on PATH (nbgrader runs `alembic` from PATH; formgrader runs nbgrader).
export PATH := $(CURDIR)/$(BIN):$(PATH)
# Jupyter refuses to run as root unless told; containers and CI machines often are root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: setup lab lab-instructor test test-all release html bench-lessons clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; v = sys.version_info; sys.exit(0 if v >= (3, 11) else "Python 3.11+ is needed; $(PYTHON) is %d.%d. Run: make PYTHON=python3.11 ..." % v[:2])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# pip, not uv, even where uv is installed: uv does not read pip's configuration (index, find-links, constraints),
	@# which is where a machine's CPU build of torch comes from; a faster install of another torch is not worth it.
	@# pip byte-compiles what it installs on one core; compileall does the same on every core (145 s -> 133 s here).
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile --editable '.[test]'
	@# A file some package ships that does not compile (a template, a Python 2 test) makes compileall's status
	@# non-zero; pip ignores those too.
	@$(BIN)/python -m compileall -qq -j 0 $(VENV)/lib || :
	@# rfc3987-syntax (pulled in through jsonschema[format-nongpl]) builds a parser when imported: 3 s in every Jupyter
	@# and nbgrader process (python-jsonschema/jsonschema#1392). jsonschema works without it (it only checks "iri").
	$(BIN)/python -m pip uninstall --quiet --yes rfc3987-syntax
	@touch $@

# The learner's view, exactly as on Binder: binder/postBuild run on .venv switches off (and locks) nbgrader's
# instructor-only tools and the assignment list (no exchange here), keeps Validate, and installs the JupyterLab and
# server settings (widget messages on the kernel's main thread, which lesson 07's sliders need; no "Jupyter news?"
# prompt; idle kernels culled after 30 minutes; no Validate on lessons). Re-run when any of these files changes.
LEARNER_VIEW := $(VENV)/.learner-view
LAB := $(BIN)/jupyter lab $(ALLOW_ROOT) --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) --ServerApp.root_dir="$(CURDIR)"

$(LEARNER_VIEW): binder/postBuild binder/jupyterlab-overrides.json binder/jupyter_server_config.json binder/custom.css \
		$(STAMP)
	binder/postBuild
	@touch $@

# Opens (and prints, for when no browser opens) lesson 01's own address, not the launcher.
FIRST_LESSON := /lab/tree/lessons/01-chain-rule.ipynb

lab: $(LEARNER_VIEW)
	$(LAB) --LabApp.default_url=$(FIRST_LESSON)

# The instructor's view of the same environment: the hub's grader settings (deploy/grader-jupyter-config) turn the
# formgrader, Create Assignment and the course list back on, for this server only.
lab-instructor: $(LEARNER_VIEW)
	JUPYTER_CONFIG_PATH="$(CURDIR)/deploy/grader-jupyter-config" $(LAB)

test: $(STAMP)
	$(BIN)/python -m pytest

# Nightly, not in CI (hours: see docs/maintainers.md): make test, plus the tests marked nightly (Binder's environment
# resolved and built, the exchange cycle, the hostile class as a second identity, incremental regrades), the class
# grader and plain nbgrader grading the whole catalogue side by side (COURSE_AGREEMENT=all) and every wrong answer at
# three grading seeds in-process.
test-all: $(STAMP)
	COURSE_TEST_ALL=1 COURSE_AGREEMENT=all $(BIN)/python -m pytest

# Regenerate the student release (exercises/) from the nbgrader sources (solutions/).
release: $(STAMP)
	$(BIN)/python -m autograder release

# The course as HTML pages for reading offline or with assistive technology: every lesson executed, every exercise as
# released, in html/ (accessible stylesheet, figures with their text alternatives, formulas as MathML).
html: $(STAMP)
	$(BIN)/python -m autograder html

# Execute every lesson in a fresh kernel and print how long each took (a report, not a test).
bench-lessons: $(STAMP)
	$(BIN)/python -m tools.lessons bench

# Check my work: every exercise notebook in exercises/ (or EXERCISE=NN-slug), every test, hidden ones included, at a
# fresh grading seed (SEED=N to repeat one); the results also go to the progress map (progress.ipynb).
check: $(STAMP)
	$(BIN)/python -m autograder check $(if $(EXERCISE),exercises/$(EXERCISE)/$(EXERCISE).ipynb) $(if $(SEED),--seed $(SEED))

.PHONY: check grade-demo bench

# Grade a synthetic demo class (correct, wrong, blank and hostile submissions); print the summary and the report path.
# The grading tooling lives in tools/ (it reads tests/), run from the repository root.
grade-demo: $(STAMP)
	$(BIN)/python -m tools.grade_demo

# 40 submissions: `python -m autograder grade` (sandboxed) against serial `nbgrader autograde` (a report, not a test).
bench: $(STAMP)
	$(BIN)/python -m tools.bench

.PHONY: sweep mutants

# The reference and every catalogued wrong answer at 20 grading seeds (hidden tests, in-process): reports any answer
# whose score changes with the seed (a report, not part of make test; SEEDS=N for another count).
sweep: $(STAMP)
	$(BIN)/python -m tools.sweep $(if $(SEEDS),--seeds $(SEEDS)) $(EXERCISE)

# Mutation-test the graders (a report, not a test): writes mutation/REPORT.md. One exercise:
# `make mutants EXERCISE=05-zero-grad` (several: EXERCISE="01-chain-rule 05-zero-grad"); `JOBS=1` for one worker.
mutants: $(STAMP)
	$(BIN)/python -m mutation $(foreach e,$(EXERCISE),--exercise $(e)) $(if $(JOBS),--jobs $(JOBS))

clean:
	rm -rf $(VENV) gradebook.db submitted autograded feedback .exchange .pytest_cache .hypothesis
