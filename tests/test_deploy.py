"""deploy/: the JupyterHub configurations parse, agree with each other and with the course, and do what they say.

The files cannot be tried on a live hub here; what can be checked without one is: every YAML file parses; the
Zero to JupyterHub values carry exactly the shared files (hub config, nbgrader config); paths agree across files
(exchange, course home, grader settings); the hub config runs and its hook gives graders, and only graders, the
instructor tools; the hub settings give every hub user the assignment list (which needs the exchange), and the grader
settings re-enable exactly what binder/postBuild disables (tests/test_binder.py checks that they take effect in a
real environment).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from traitlets.config import Config

from autograder import course

DEPLOY = course.ROOT / "deploy"
HUB_CONFIG = DEPLOY / "jupyterhub_config.d" / "autograd-course.py"
NBGRADER_CONFIG = DEPLOY / "nbgrader_config.py"
GRADER_CONFIG = DEPLOY / "grader-jupyter-config"
HUB_SETTINGS = DEPLOY / "hub-jupyter-config"
COURSE_HOME = "/srv/autograd-course"
YAML_FILES = sorted(DEPLOY.rglob("*.yaml")) + sorted(DEPLOY.rglob("*.yml"))


def run_config(path: Path, text: str | None = None) -> Config:
    """Execute a Jupyter-style config file the way traitlets does and return the config it built."""
    config = Config()
    namespace = {"get_config": lambda: config, "__file__": str(path), "__name__": "__config__"}
    exec(compile(text if text is not None else path.read_text(), str(path), "exec"), namespace)
    config["__namespace__"] = namespace  # functions defined by the file, for the hook test
    return config


def load_yaml(path: Path) -> list:
    return list(yaml.safe_load_all(path.read_text()))


@pytest.fixture(scope="module")
def z2jh() -> dict:
    return load_yaml(DEPLOY / "z2jh" / "config.yaml")[0]


@pytest.fixture(scope="module")
def tljh() -> dict:
    return load_yaml(DEPLOY / "tljh" / "config.yaml")[0]


def test_there_are_yaml_configs_for_both_hubs():
    names = {p.relative_to(DEPLOY).as_posix() for p in YAML_FILES}
    assert {"tljh/config.yaml", "z2jh/config.yaml", "z2jh/exchange.yaml"} <= names


@pytest.mark.parametrize("path", YAML_FILES, ids=[p.relative_to(DEPLOY).as_posix() for p in YAML_FILES])
def test_yaml_parses(path):
    documents = load_yaml(path)
    assert documents and all(isinstance(d, dict) for d in documents), f"{path} has an empty or non-mapping document"


@pytest.mark.parametrize("path", sorted(DEPLOY.rglob("*.json")), ids=lambda p: p.name)
def test_json_parses(path):
    assert isinstance(json.loads(path.read_text()), dict)


@pytest.mark.parametrize("path", sorted(DEPLOY.rglob("*.sh")), ids=lambda p: p.name)
def test_shell_scripts_are_valid_bash(path):
    subprocess.run(["bash", "-n", str(path)], check=True)


# -------------------------------------------------------------------------------------------------- the hub config

def test_hub_config_defines_the_per_course_groups_for_nbgrader():
    config = run_config(HUB_CONFIG)
    namespace = config["__namespace__"]
    assert namespace["COURSE"] == run_config(course.ROOT / "nbgrader_config.py").CourseDirectory.course_id
    groups = config.JupyterHub.load_groups
    assert set(groups) == {"formgrade-autograd-course", "nbgrader-autograd-course"}
    assert "grader-autograd-course" in groups["formgrade-autograd-course"]["users"]


def test_hub_config_opens_jupyterlab_in_the_home_directory_with_one_thread():
    config = run_config(HUB_CONFIG)
    assert config.Spawner.default_url == "/lab"
    assert config.Spawner.notebook_dir == "~"
    assert config.Spawner.environment == {"OMP_NUM_THREADS": "1",
                                          "JUPYTER_CONFIG_PATH": f"{COURSE_HOME}/deploy/hub-jupyter-config"}


def test_hub_config_lets_server_tokens_use_their_users_permissions():
    roles = {role["name"]: role for role in run_config(HUB_CONFIG).JupyterHub.load_roles}
    assert roles["server"]["scopes"] == ["inherit"]
    assert roles["grader-autograd-course"]["groups"] == ["formgrade-autograd-course"]
    assert "groups!group=nbgrader-autograd-course" in roles["grader-autograd-course"]["scopes"]


def fake_spawner(*groups: str, environment: dict | None = None):
    user = SimpleNamespace(name="no-such-account-on-this-machine", groups=[SimpleNamespace(name=g) for g in groups])
    return SimpleNamespace(user=user, environment=environment if environment is not None else {})


def test_pre_spawn_hook_gives_graders_and_only_graders_the_instructor_tools():
    config = run_config(HUB_CONFIG)
    hook = config.Spawner.pre_spawn_hook
    shared = dict(config.Spawner.environment)
    grader, learner = fake_spawner("formgrade-autograd-course", environment=shared), fake_spawner(
        "nbgrader-autograd-course", environment=shared)
    hook(grader)
    hook(learner)
    hub_settings = f"{COURSE_HOME}/deploy/hub-jupyter-config"
    assert grader.environment == {"OMP_NUM_THREADS": "1", "JUPYTER_CONFIG_PATH":
                                  f"{COURSE_HOME}/deploy/grader-jupyter-config:{hub_settings}"}
    assert learner.environment == {"OMP_NUM_THREADS": "1", "JUPYTER_CONFIG_PATH": hub_settings}
    assert shared == learner.environment, "the hook changed the dict every spawner shares"


def test_grader_config_path_is_where_the_course_files_are_on_both_hubs():
    path = run_config(HUB_CONFIG)["__namespace__"]["GRADER_CONFIG"]
    assert path == f"{COURSE_HOME}/deploy/{GRADER_CONFIG.name}"
    assert f"COURSE_HOME={COURSE_HOME} " in (DEPLOY / "tljh" / "install.sh").read_text()
    assert f"--target-repo-dir {COURSE_HOME}" in (DEPLOY / "README.md").read_text()


# ------------------------------------------------------------------------------------------- nbgrader and graders

def test_nbgrader_config_sets_the_shared_exchange_and_the_hub_groups():
    config = run_config(NBGRADER_CONFIG)
    assert config.Exchange.root == "/srv/nbgrader/exchange"
    assert config.Exchange.path_includes_course is True
    assert config.Authenticator.plugin_class.__name__ == "JupyterHubAuthPlugin"


def post_build_disables(group: str) -> tuple[set[str], set[str]]:
    """The lab plugins and server extensions that binder/postBuild switches off, read from the script: ``group`` is
    "instructor" (locked too) or "exchange" (the assignment list, which a hub turns back on)."""
    text = (course.ROOT / "binder" / "postBuild").read_text()
    block = text.split(f"{group}_plugins=(")[1].split("\n\n")[0]
    plugins = set(re.search(r"^([^)]*)\)", block).group(1).split())
    modules = set(re.findall(r"nbgrader\.server_extensions\.\w+", block.split("server extension disable")[1]))
    return plugins, modules


def test_grader_settings_re_enable_exactly_what_post_build_disables():
    plugins, modules = post_build_disables("instructor")
    exchange_plugins, exchange_modules = post_build_disables("exchange")
    page = json.loads((GRADER_CONFIG / "labconfig" / "page_config.json").read_text())
    assert page == {"disabledExtensions": dict.fromkeys(plugins | exchange_plugins, False),
                    "lockedExtensions": dict.fromkeys(plugins, False)}
    server = json.loads(next((GRADER_CONFIG / "jupyter_server_config.d").glob("*.json")).read_text())
    assert server == {"ServerApp": {"jpserver_extensions": dict.fromkeys(modules | exchange_modules, True)}}


def test_hub_settings_give_every_hub_user_the_assignment_list_back():
    """Only a hub has nbgrader's exchange: the assignment list is off in the image (and on Binder, and with `make
    lab`) and on for a hub's users."""
    plugins, modules = post_build_disables("exchange")
    assert plugins == {"@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu"}
    page = json.loads((HUB_SETTINGS / "labconfig" / "page_config.json").read_text())
    assert page == {"disabledExtensions": dict.fromkeys(plugins, False)}
    server = json.loads(next((HUB_SETTINGS / "jupyter_server_config.d").glob("*.json")).read_text())
    assert server == {"ServerApp": {"jpserver_extensions": dict.fromkeys(modules, True)}}


# ------------------------------------------------------------------------------------------------ Zero to JupyterHub

def test_z2jh_carries_exactly_the_shared_hub_config(z2jh):
    assert z2jh["hub"]["extraConfig"]["autograd-course"] == HUB_CONFIG.read_text()


def test_z2jh_mounts_exactly_the_shared_nbgrader_config(z2jh):
    extra = z2jh["singleuser"]["extraFiles"]["nbgrader-config"]
    assert extra["mountPath"] == "/etc/jupyter/nbgrader_config.py"
    assert extra["stringData"] == NBGRADER_CONFIG.read_text()


def test_z2jh_opens_jupyterlab(z2jh):
    assert z2jh["singleuser"]["defaultUrl"] == "/lab"


def test_z2jh_mounts_one_read_write_many_exchange_where_nbgrader_looks(z2jh):
    (claim, job) = load_yaml(DEPLOY / "z2jh" / "exchange.yaml")
    assert claim["kind"] == "PersistentVolumeClaim" and claim["spec"]["accessModes"] == ["ReadWriteMany"]
    storage = z2jh["singleuser"]["storage"]
    volumes = {v["name"]: v for v in storage["extraVolumes"]}
    mounts = {m["name"]: m for m in storage["extraVolumeMounts"]}
    assert volumes["nbgrader-exchange"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert mounts["nbgrader-exchange"]["mountPath"] == run_config(NBGRADER_CONFIG).Exchange.root
    assert job["kind"] == "Job" and job["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "chmod", "1777", "/exchange"]


def test_z2jh_image_is_pinned_to_a_tag(z2jh):
    image = z2jh["singleuser"]["image"]
    assert image["tag"] and image["tag"] != "latest"


# ---------------------------------------------------------------------------------------------- The Littlest JupyterHub

def test_tljh_defaults_to_jupyterlab_and_admits_the_grader(tljh):
    assert tljh["user_environment"]["default_app"] == "jupyterlab"
    assert "grader-autograd-course" in tljh["users"]["allowed"]
    assert set(tljh["users"]["admin"]).isdisjoint({"grader-autograd-course"})


def test_tljh_install_uses_the_shared_files_and_binder_post_build():
    script = (DEPLOY / "tljh" / "install.sh").read_text()
    for needed in ("JUPYTER_SYSTEM_CONFIG=/etc/jupyter ", "$JUPYTER_SYSTEM_CONFIG/nbgrader_config.py\"",
                   "deploy/jupyterhub_config.d/autograd-course.py", "binder/postBuild", "binder/environment.yml",
                   f"EXCHANGE={run_config(NBGRADER_CONFIG).Exchange.root} ", "nbgitpuller=="):
        assert needed in script, f"install.sh lacks {needed!r}"


def test_no_hub_gives_learners_the_reference_answers():
    """On both hubs the learners' copy of the course has no readable solutions/ (the grader clones their own; TLJH's
    install.sh, run in tests/test_tljh_install.py, closes it)."""
    assert "rm -rf /srv/autograd-course/solutions'" in (DEPLOY / "README.md").read_text()


# ------------------------------------------------------------------------------------------------------ the docs

def test_deploy_readme_links_resolve():
    text = (DEPLOY / "README.md").read_text()
    local = [link for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if "://" not in link]
    missing = [link for link in local if not (DEPLOY / link).exists()]
    assert local and not missing, f"deploy/README.md links to missing files: {missing}"


def test_deploy_readme_covers_what_a_course_team_needs():
    text = (DEPLOY / "README.md").read_text()
    for topic in ("The Littlest JupyterHub", "Zero to JupyterHub", "grader-autograd-course",
                  "formgrade-autograd-course",
                  "nbgrader-autograd-course", "/srv/nbgrader/exchange", "ReadWriteMany", "shared-volume caveat",
                  "nbgitpuller", "JupyterLab", "release_assignment", "collect", "autograde", "release_feedback"):
        assert topic in text, f"deploy/README.md does not mention {topic!r}"


def test_pre_spawn_hook_makes_a_users_home_hers_alone(tmp_path, monkeypatch):
    """On one machine (TLJH: accounts jupyter-<name>), a learner's home holds her work and feedback: 0700 before her
    server starts. A hub whose users have no account on its machine (Kubernetes) is left alone."""
    import os
    import pwd

    config = run_config(HUB_CONFIG)
    home = tmp_path / "jupyter-learner01"
    home.mkdir(mode=0o755)
    accounts = {"jupyter-learner01": SimpleNamespace(pw_dir=str(home))}
    monkeypatch.setattr(pwd, "getpwnam", lambda name: accounts[name])
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    spawner = fake_spawner("nbgrader-autograd-course", environment={})
    spawner.user.name, spawner.unix_username_template = "learner01", "jupyter-{USERNAME}"
    config.Spawner.pre_spawn_hook(spawner)
    assert home.stat().st_mode & 0o777 == 0o700
    kubernetes = fake_spawner("nbgrader-autograd-course", environment={})
    kubernetes.user.name = "learner02"  # no account of that name here: nothing to do, nothing raised
    config.Spawner.pre_spawn_hook(kubernetes)
