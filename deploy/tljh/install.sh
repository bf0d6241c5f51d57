#!/usr/bin/env bash
# Set up the autograd course on a machine that already runs The Littlest JupyterHub (https://tljh.jupyter.org).
# Run as root from a clone of the course repository:   sudo bash deploy/tljh/install.sh
# It is idempotent: run it again after `git pull` to update the environment and the configuration.
# DESTDIR (empty on a hub) stages every path below it, as `make install` does: tests/test_tljh_install.py installs
# into a scratch folder whose opt/tljh holds stand-ins for TLJH's conda environments.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
DESTDIR="${DESTDIR:-}"
COURSE_HOME=/srv/autograd-course        # where every server finds the course files (read-only for users)
EXCHANGE=/srv/nbgrader/exchange         # nbgrader's exchange, shared by all accounts on this machine
USER_ENV=/opt/tljh/user                 # TLJH's conda environment for the user servers
HUB_ENV=/opt/tljh/hub                   # TLJH's environment of the hub itself
TLJH_CONFIG=/opt/tljh/config
JUPYTER_SYSTEM_CONFIG=/etc/jupyter      # read by every Jupyter process on the machine (nbgrader's settings)

# 1. The course files, owned by root, readable by all.
if [ "$REPO" != "$DESTDIR$COURSE_HOME" ]; then
    mkdir -p "$DESTDIR$COURSE_HOME"
    cp -a "$REPO"/. "$DESTDIR$COURSE_HOME"/
fi
chmod -R a+rX "$DESTDIR$COURSE_HOME"
# The sources (reference answers, hidden tests) stay with the grader, who grades from their own clone (README, "The
# grader account"): no learner reads them. Check my work then runs the visible tests (docs/instructors.md).
chmod -R go= "$DESTDIR$COURSE_HOME/solutions"

# 2. The learners' software: the pinned conda environment, then what Binder's postBuild does (the course package,
#    and the instructor-only nbgrader tools switched off for everyone), plus nbgitpuller for the lesson links.
"$DESTDIR$USER_ENV/bin/conda" env update --prefix "$DESTDIR$USER_ENV" --file "$DESTDIR$COURSE_HOME/binder/environment.yml"
(cd "$DESTDIR$COURSE_HOME" && PATH="$DESTDIR$USER_ENV/bin:$PATH" binder/postBuild)
"$DESTDIR$USER_ENV/bin/pip" install --no-cache-dir nbgitpuller==1.3.0

# 3. nbgrader for everyone: the exchange (world-writable with the sticky bit, as nbgrader expects) and the
#    hub-wide configuration.
mkdir -p "$DESTDIR$EXCHANGE"
chmod 1777 "$DESTDIR$EXCHANGE"
install -D -m 0644 "$DESTDIR$COURSE_HOME/deploy/nbgrader_config.py" "$DESTDIR$JUPYTER_SYSTEM_CONFIG/nbgrader_config.py"

# 4. The hub: groups, the graders' tools, JupyterLab by default; then the TLJH settings, and reload.
install -D -m 0644 "$DESTDIR$COURSE_HOME/deploy/jupyterhub_config.d/autograd-course.py" \
    "$DESTDIR$TLJH_CONFIG/jupyterhub_config.d/autograd-course.py"
# The LMS launch (LTI 1.3, docs/deployment.md): the authenticator in the hub's own environment, and the settings,
# which stay off until their values are filled in; a copy already there (with its values) is kept.
"$DESTDIR$HUB_ENV/bin/python3" -m pip install --no-cache-dir jupyterhub-ltiauthenticator==1.6.3
if [ ! -e "$DESTDIR$TLJH_CONFIG/jupyterhub_config.d/lti13.py" ]; then
    install -m 0644 "$DESTDIR$COURSE_HOME/deploy/jupyterhub_config.d/lti13.py" \
        "$DESTDIR$TLJH_CONFIG/jupyterhub_config.d/lti13.py"
else
    echo "kept the existing $TLJH_CONFIG/jupyterhub_config.d/lti13.py; compare it with the course's deploy/ copy"
fi
if [ ! -e "$DESTDIR$TLJH_CONFIG/config.yaml" ]; then
    install -m 0600 "$DESTDIR$COURSE_HOME/deploy/tljh/config.yaml" "$DESTDIR$TLJH_CONFIG/config.yaml"
else
    echo "kept the existing $TLJH_CONFIG/config.yaml; compare it with deploy/tljh/config.yaml"
fi
tljh-config reload hub
echo "done: see deploy/README.md for the grader account and the nbgitpuller link"
