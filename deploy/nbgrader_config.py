"""Hub-wide nbgrader settings for learners and graders: install as /etc/jupyter/nbgrader_config.py.

TLJH: deploy/tljh/install.sh copies it there. Zero to JupyterHub: deploy/z2jh/config.yaml mounts the same text there
(tests/test_deploy.py checks the two agree).

A grader working inside the course repository also reads the repository's own nbgrader_config.py, which wins:
it sets the course directory (solutions/ -> exercises/) and Exchange.root = <repository>/.exchange, which is why the
grader's clone gets the symlink .exchange -> /srv/nbgrader/exchange (deploy/README.md, "The grader account").
"""

from nbgrader.auth import JupyterHubAuthPlugin

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

# The shared exchange: one folder that every learner's and grader's server sees at the same path.
c.Exchange.root = "/srv/nbgrader/exchange"
# Several courses on one hub: a learner's assignments land in ~/<course id>/<assignment>, and JupyterHub groups
# decide who sees which course: nbgrader-<course id> for learners, formgrade-<course id> for graders.
c.Exchange.path_includes_course = True
c.Authenticator.plugin_class = JupyterHubAuthPlugin
