"""JupyterHub settings for the autograd course: groups, the grader's tools, private homes, JupyterLab as the default UI.

TLJH: deploy/tljh/install.sh copies this file to /opt/tljh/config/jupyterhub_config.d/.
Zero to JupyterHub: deploy/z2jh/config.yaml carries the same text in hub.extraConfig (tests/test_deploy.py checks).
Edit COURSE, GRADERS and LEARNERS (or leave LEARNERS empty: `nbgrader db student add` adds learners to the group).
"""

COURSE = "autograd-course"  # nbgrader's course id (the repository's nbgrader_config.py sets the same)
GRADERS = ["grader-autograd-course"]  # the shared grader account, plus any instructor who grades
LEARNERS: list[str] = []
#: Where the grader settings of deploy/grader-jupyter-config/ are on the user servers.
GRADER_CONFIG = "/srv/autograd-course/deploy/grader-jupyter-config"
#: ... and the hub's own settings for everyone (deploy/hub-jupyter-config/: the assignment list, which needs the
#: exchange only a hub has; the image, built like Binder's, switches it off).
HUB_CONFIG = "/srv/autograd-course/deploy/hub-jupyter-config"

c = get_config()  # noqa: F821 - provided by traitlets when JupyterHub loads this file

# Per-course groups, named the way nbgrader's JupyterHubAuthPlugin expects them. One more course on the same hub:
# another pair of groups (and another grader account).
c.JupyterHub.load_groups = {
    f"formgrade-{COURSE}": {"users": GRADERS},
    f"nbgrader-{COURSE}": {"users": LEARNERS},
}

# nbgrader's JupyterHubAuthPlugin calls the hub API with the user server's token: learners' servers read their
# own groups (which courses to list); graders' servers also add learners to the course group
# (`nbgrader db student add`). "inherit" gives a server's token the permissions of its user.
c.JupyterHub.load_roles = [
    {"name": "server", "scopes": ["inherit"]},
    {"name": f"grader-{COURSE}", "groups": [f"formgrade-{COURSE}"],
     "scopes": ["list:users", "read:users:groups", "list:groups", "read:groups", f"groups!group=nbgrader-{COURSE}"]},
]

# JupyterLab is what learners see, on their home directory (the Zero to JupyterHub image would otherwise start in
# the course files baked into it, /srv/autograd-course).
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
# One math thread per kernel: a user gets about one core, and PyTorch would otherwise start one thread per core of
# the machine, which makes the lessons' small tensor operations many times slower.
c.Spawner.environment = {"OMP_NUM_THREADS": "1", "JUPYTER_CONFIG_PATH": HUB_CONFIG}


def instructor_tools_for_graders(spawner):
    """The image disables the formgrader, create-assignment and course list for everyone (binder/postBuild);
    members of a formgrade-* group get them back: JUPYTER_CONFIG_PATH comes before every other config dir."""
    if any(group.name.startswith("formgrade-") for group in spawner.user.groups):
        # A new dict: the configured one is shared by every spawner.
        spawner.environment = {**spawner.environment, "JUPYTER_CONFIG_PATH": f"{GRADER_CONFIG}:{HUB_CONFIG}"}


def private_home(spawner):
    """On one machine (TLJH, or any hub whose users are Unix accounts), a user's home holds her working copies and
    her fetched feedback: mode 0700, so that no other learner can read it (useradd's default is often 0755). The
    account is TLJH's jupyter-<name> or, for other spawners, the hub user's own name; on Kubernetes there is none
    on the hub's machine, and nothing happens."""
    import os
    import pwd

    template = getattr(spawner, "unix_username_template", "{USERNAME}")
    try:
        home = pwd.getpwnam(template.format(USERNAME=spawner.user.name)).pw_dir
    except KeyError:
        return
    if os.path.isdir(home) and os.geteuid() == 0:
        os.chmod(home, 0o700)


def prepare_server(spawner):
    instructor_tools_for_graders(spawner)
    private_home(spawner)


c.Spawner.pre_spawn_hook = prepare_server
