"""Binder: repo2docker recognises binder/, and binder/postBuild leaves learners exactly the extensions they need.

* ``repo2docker --no-build --debug`` (no Docker needed) prints the Dockerfile it would build: it must install
  binder/environment.yml, run binder/postBuild and use binder/start.
* binder/environment.yml is what binder/environments.py writes from pyproject.toml, and the exact requirement lines
  it hands pip resolve here (``pip install --dry-run --report``) to exactly pyproject.toml's versions, PyTorch as
  its CPU build (this machine cannot reach PyTorch's index, but holds the very wheel that index serves).
* binder/postBuild runs in a scratch environment whose prefix, HOME and Jupyter directories are all under tmp:
  afterwards the course package imports from the scratch copy, and ``jupyter labextension list`` and
  ``jupyter server extension list`` show exactly the instructor-only nbgrader parts and the assignment list (which
  needs a hub's exchange) disabled, Validate still enabled, and everything else as it was; the instructor-only
  plugins are locked; and what a learner's server would load (computed as JupyterLab and Jupyter Server do) agrees,
  including the JupyterLab setting that keeps widget messages on the kernel's main thread. With
  deploy/hub-jupyter-config on JUPYTER_CONFIG_PATH (what a hub gives everyone) the assignment list comes back, and
  with deploy/grader-jupyter-config before it (what the hub gives graders) the instructor tools too. Nothing outside
  tmp is written.
* README's Binder badge and per-lesson links, and the nbgitpuller link, come from binder/links.py.
* binder/start sizes the thread pools from the CPU quota and execs the command it is given.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from autograder import course

BINDER = course.ROOT / "binder"
sys.path.insert(0, str(BINDER))
import environments  # noqa: E402  (binder/environments.py: the conda files, written from pyproject.toml)
import links  # noqa: E402  (binder/links.py: the one place that names the GitHub repository)

VENV_PREFIX = Path(sys.prefix)
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])

#: What postBuild turns off: (JupyterLab plugin ids, server extension modules). create-assignment is lab-only.
DISABLED_LAB_PLUGINS = {f"@jupyter/nbgrader:{p}" for p in ("formgrader", "create-assignment", "course-list")}
DISABLED_SERVER_EXTENSIONS = {f"nbgrader.server_extensions.{m}" for m in ("formgrader", "course_list")}
#: What postBuild turns off but does not lock, because a hub turns it back on: the assignment list (it needs the
#: exchange, which only a hub has; deploy/hub-jupyter-config) and the Nbgrader menu, which holds nothing else for
#: learners.
EXCHANGE_LAB_PLUGINS = {"@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu"}
EXCHANGE_SERVER_EXTENSIONS = {"nbgrader.server_extensions.assignment_list"}
#: What learners keep everywhere: the Validate button, lab and server parts.
KEPT_LAB_PLUGINS = {"@jupyter/nbgrader:validate-assignment"}
KEPT_SERVER_EXTENSIONS = {"nbgrader.server_extensions.validate_assignment"}

ANSI = re.compile(r"\x1b\[[0-9;]*m")

# One worker runs the whole module under pytest-xdist, so the module-scoped fixtures (repo2docker, the scratch
# environment) are built once.
pytestmark = pytest.mark.xdist_group("binder")
#: A pip resolution against the registry and a scratch environment built from it take two thirds of this module's
#: time and change only with pyproject.toml's pins or binder/: make test-all runs them. make test still checks every
#: file here, repo2docker's plan, and (tests/test_browser.py) postBuild's learner and instructor views in JupyterLab.
NIGHTLY_ENVIRONMENT = pytest.mark.nightly("builds or resolves a whole environment from the package registry; changes "
                                          "with the pins and binder/ only")


# --------------------------------------------------------------------------------------------- the files themselves

def test_binder_environment_holds_python_pip_and_the_pinned_requirements_only():
    text = (BINDER / "environment.yml").read_text()
    assert not (BINDER / "environment.yml").is_symlink()
    assert text == environments.render(course=False)
    conda = text.split("  - pip:")[0]
    assert re.findall(r"^  - (\S+)$", conda, flags=re.M) == ["conda-forge", "nodefaults", "python=3.11", "pip"]


@NIGHTLY_ENVIRONMENT
def test_binder_requirements_resolve_to_exactly_the_pinned_versions_with_cpu_torch(tmp_path):
    """What Binder's pip gets, resolved here: every pyproject pin exactly, torch as 2.13.0+cpu, no CUDA libraries."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("\n".join(environments.requirement_lines(course=False)) + "\n")
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--retries", "0", "--timeout", "10", "--report", str(report), "-r", str(requirements)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = {item["metadata"]["name"].lower(): item["metadata"]["version"]
                for item in json.loads(report.read_text())["install"]}
    for pin in environments.pins():
        name, version = pin.split("==")
        expected = version + "+cpu" if name == "torch" else version
        assert resolved.get(name.lower()) == expected, f"{pin}: pip resolved {resolved.get(name.lower())}"
    assert not [name for name in resolved if name.startswith("nvidia-")], "a CUDA build of torch was chosen"


@pytest.mark.parametrize("name", ["postBuild", "start"])
def test_binder_scripts_are_executable_bash(name):
    script = BINDER / name
    assert os.access(script, os.X_OK), f"binder/{name} is not executable"
    assert script.read_text().startswith("#!/usr/bin/env bash\n")
    subprocess.run(["bash", "-n", str(script)], check=True)  # syntax


def test_dockerignore_keeps_local_state_out_of_an_image_built_from_a_working_copy():
    """repo2docker sends the whole folder to Docker; binder/.dockerignore (read by repo2docker, with Docker's
    pattern rules) must drop the local venv, caches and grading state but keep the course."""
    from docker.utils.build import exclude_paths

    patterns = [line.strip() for line in (BINDER / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    files = set(exclude_paths(str(course.ROOT), patterns))
    dropped = (".venv/", "artifacts/", ".pytest_cache/", ".hypothesis/", "submitted/", "feedback/", ".exchange/")
    assert not [f for f in files if f.startswith(dropped) or "__pycache__" in f]
    assert {"environment.yml", "binder/postBuild", "binder/start", "nbgrader_config.py",
            "lessons/01-chain-rule.ipynb", "exercises/01-chain-rule/01-chain-rule.ipynb"} <= files


# ------------------------------------------------------------------------------------------- README launch links

README = (course.ROOT / "README.md").read_text()


def test_readme_binder_links_are_what_binder_links_py_writes():
    assert links.render_readme(README) == README, "README's Binder links are stale: python binder/links.py readme"


def test_readme_badge_opens_jupyterlab_on_the_first_lesson():
    first = course.lessons()[0].relative_to(course.ROOT).as_posix()
    url = f"https://mybinder.org/v2/gh/{links.REPOSITORY}/{links.BRANCH}?urlpath=lab/tree/{first}"
    badge = f"[![Binder](https://mybinder.org/badge_logo.svg)]({url})"
    assert README.split("\n")[2] == badge, "the badge belongs right under the title"


def test_readme_has_one_binder_link_per_lesson_in_its_row():
    rows = {re.search(r"\]\((lessons/[^)]+)\)", line).group(1): line for line in README.split("\n")
            if re.match(r"\| \d\d \| \[", line)}
    for lesson in course.lessons():
        path = lesson.relative_to(course.ROOT).as_posix()
        assert path in rows, f"{path} has no row in the README table"
        url = f"https://mybinder.org/v2/gh/{links.REPOSITORY}/{links.BRANCH}?urlpath=lab/tree/{path}"
        assert rows[path].count("https://mybinder.org/") == 1 and f"[launch]({url})" in rows[path]


def test_repository_is_named_in_one_place():
    """Every address of the course's own repository in README.md and deploy/ is binder/links.py's REPOSITORY."""
    documents = [course.ROOT / "README.md", *sorted(p for p in (course.ROOT / "deploy").rglob("*") if p.is_file())]
    seen = 0
    for path in documents:
        text = path.read_text()
        found = re.findall(r"mybinder\.org/v2/gh/([\w.-]+/[\w.-]+)/", text)
        found += re.findall(r"github\.com/([\w.-]+/autograd-course)\b", text)
        found += ["/".join(pair) for pair in re.findall(r"github\.com%2F([\w.-]+)%2F([\w.-]+?)(?:&|$)", text)]
        for name in found:
            assert name == links.REPOSITORY, f"{path.name} names {name}, not binder/links.py's REPOSITORY"
        seen += len(found)
    assert seen >= len(course.lessons()) + 3


def test_deploy_readme_shows_the_link_links_py_prints():
    url = links.nbgitpuller_url("https://hub.example.edu", "lessons/01-chain-rule.ipynb")
    assert url in (course.ROOT / "deploy" / "README.md").read_text()


def test_nbgitpuller_link_clones_the_repository_and_opens_the_lesson_in_jupyterlab():
    from urllib.parse import parse_qs, urlsplit

    url = urlsplit(links.nbgitpuller_url("https://hub.example.edu/", "lessons/01-chain-rule.ipynb"))
    assert (url.scheme, url.netloc, url.path) == ("https", "hub.example.edu", "/hub/user-redirect/git-pull")
    query = {key: values[0] for key, values in parse_qs(url.query).items()}
    folder = links.REPOSITORY.split("/")[1]
    assert query == {"repo": f"https://github.com/{links.REPOSITORY}", "branch": links.BRANCH,
                     "urlpath": f"lab/tree/{folder}/lessons/01-chain-rule.ipynb"}


# ------------------------------------------------------------------------------------- repo2docker reads the config

@pytest.fixture(scope="module")
def repo2docker_plan() -> str:
    """What ``repo2docker --no-build --debug`` prints for this repository: its log and the rendered Dockerfile."""
    executable = Path(sys.executable).parent / "repo2docker"
    done = subprocess.run([str(executable), "--no-build", "--debug", str(course.ROOT)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def test_repo2docker_picks_the_conda_buildpack_with_python_3_11(repo2docker_plan):
    assert "Building conda environment for python=3.11" in repo2docker_plan


def test_repo2docker_installs_binder_environment_yml(repo2docker_plan):
    # The binder/ folder exists, so repo2docker reads its config from there (root files are ignored).
    assert "COPY --chown=0:0 src/binder/environment.yml ${REPO_DIR}/binder/environment.yml" in repo2docker_plan
    assert re.search(r'env update -p \$\{NB_PYTHON_PREFIX\} --file "binder/environment\.yml"', repo2docker_plan)


def test_repo2docker_runs_post_build(repo2docker_plan):
    assert "RUN chmod +x binder/postBuild" in repo2docker_plan
    assert "RUN ./binder/postBuild" in repo2docker_plan


def test_repo2docker_uses_start(repo2docker_plan):
    assert 'ENV R2D_ENTRYPOINT="${REPO_DIR}/binder/start"' in repo2docker_plan


# ------------------------------------------------------------------- postBuild in a scratch environment under tmp

#: Console scripts postBuild and the checks call, written into the scratch environment's bin/.
SCRIPTS = {
    "pip": "pip._internal.cli.main:main",
    "jupyter": "jupyter_core.command:main",
    "jupyter-labextension": "jupyterlab.labextensions:main",
    "jupyter-server": "jupyter_server.serverapp:main",
}


def installed_jupyter_files() -> list[Path]:
    """The venv's etc/jupyter and share/jupyter files that installing its packages put there (their RECORDs), relative
    to the venv; not files written since, e.g. by `make lab`, which runs binder/postBuild on the venv."""
    import importlib.metadata

    found = set()
    for distribution in importlib.metadata.distributions():
        for file in distribution.files or ():
            path = Path(os.path.normpath(distribution.locate_file(file)))
            if path.is_relative_to(VENV_PREFIX / "etc" / "jupyter") or path.is_relative_to(
                    VENV_PREFIX / "share" / "jupyter"):
                found.add(path.relative_to(VENV_PREFIX))
    return sorted(found)


def make_scratch_environment(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A Python environment at tmp/env that has this venv's packages, but its own prefix (so --sys-prefix means
    tmp/env), its own etc/jupyter and share/jupyter (copied, as installing the packages made them), and
    HOME, the Jupyter user directories, caches and TMPDIR under tmp. Returns (prefix, environment variables)."""
    prefix = tmp / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    site = Path(subprocess.run([str(prefix / "bin" / "python"), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # A plain path line: this venv's packages become importable, but its .pth files (among them the editable
    # install of autograder pointing at the repository) are not processed, so postBuild must install autograder.
    (site / "course_venv.pth").write_text(f"{SITE_PACKAGES}\n")
    for name, target in SCRIPTS.items():
        module, function = target.split(":")
        script = prefix / "bin" / name
        script.write_text(f"#!{prefix / 'bin' / 'python'}\nimport sys\nfrom {module} import {function}\n"
                          f"sys.exit({function}())\n")
        script.chmod(0o755)
    for relative in installed_jupyter_files():
        (prefix / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(VENV_PREFIX / relative, prefix / relative)

    home = tmp / "home"
    for folder in (home, tmp / "tmp"):
        folder.mkdir()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("JUPYTER", "PIP_", "PYTHON", "VIRTUAL_ENV", "CONDA"))}
    env.update({
        "PATH": os.pathsep.join([str(prefix / "bin"), "/usr/bin", "/bin"]),
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
        "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(home / ".local" / "share" / "jupyter" / "runtime"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "TMPDIR": str(tmp / "tmp"),
        # Offline and reproducible: setuptools (already installed) builds the editable wheel; no index is asked.
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    })
    return prefix, env


def copy_repository(destination: Path) -> Path:
    """What postBuild works on: the package, its metadata and binder/."""
    destination.mkdir()
    for name in ("pyproject.toml", "README.md", "environment.yml", "nbgrader_config.py"):
        shutil.copy2(course.ROOT / name, destination / name)
    shutil.copytree(course.ROOT / "autograder", destination / "autograder",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(BINDER, destination / "binder", symlinks=True)
    return destination


def run(command: list[str], env: dict[str, str], cwd: Path) -> str:
    return run_together([command], env, cwd)[0]


def run_together(commands: list[list[str]], env: dict[str, str], cwd: Path,
                 envs: list[dict[str, str]] | None = None) -> list[str]:
    """Run commands at the same time (each Jupyter command spends seconds importing); their outputs, ANSI-free.
    ``envs``, if given, is one environment per command."""
    running = [subprocess.Popen(c, env=e, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for c, e in zip(commands, envs or [env] * len(commands))]
    outputs = []
    for command, process in zip(commands, running):
        output, _ = process.communicate(timeout=300)
        assert process.returncode == 0, f"{' '.join(command)} failed:\n{output[-4000:]}"
        outputs.append(ANSI.sub("", output))
    return outputs


LISTINGS = [["jupyter", "labextension", "list"], ["jupyter", "server", "extension", "list"]]


def parse_lab(text: str) -> dict[str, set[str]]:
    """``jupyter labextension list`` -> enabled extensions, disabled plugins, locked plugins."""
    enabled = set(re.findall(r"^\s+(\S+) v\S+ enabled", text, re.M))
    locked = {plugin.strip() for group in re.findall(r"\(plugins: ([^)]*) locked\)", text)
              for plugin in group.split(",")}
    disabled_section = text.split("Disabled extensions:", 1)[1] if "Disabled extensions:" in text else ""
    disabled = set(re.findall(r"^ {4}(\S+)\s*$", disabled_section, re.M))
    return {"enabled": enabled, "disabled": disabled, "locked": locked}


def parse_server(text: str) -> set[str]:
    """``jupyter server extension list`` -> the server extensions it shows enabled. Only the environment's config dir
    mentions extensions here (HOME is empty), so the first mention decides; RUNTIME_STATE below is the check that
    follows Jupyter's real precedence."""
    state: dict[str, bool] = {}
    for name, status in re.findall(r"^ {4}(\S+) (enabled|disabled)\s*$", text, re.M):
        state.setdefault(name, status == "enabled")
    return {name for name, on in state.items() if on}


def extension_state(env: dict[str, str], cwd: Path) -> tuple[dict[str, set[str]], set[str]]:
    lab, server = run_together(LISTINGS, env, cwd)
    return parse_lab(lab), parse_server(server)


#: What a server started in the environment would use, computed the way JupyterLab and Jupyter Server do it:
#: the page config's disabled plugins, and the server extensions that end up enabled.
RUNTIME_STATE = """
import json, os
from jupyterlab.commands import get_app_dir
from jupyterlab_server.settings_utils import _get_overrides
from jupyter_core.paths import jupyter_config_path, jupyter_path
from jupyter_server.extension.config import ExtensionConfigManager
from jupyterlab_server.config import get_page_config
from jupyter_server.serverapp import ServerApp
page = get_page_config(jupyter_path("labextensions"))
server = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()
overrides, error = _get_overrides(os.path.join(get_app_dir(), "settings"))
app = ServerApp()
app.load_config_file()  # the settings files exactly as a server reads them
settings = app.config
css = [os.path.join(folder, "custom.css") for folder in settings.ServerApp.get("tornado_settings", {}).get(
    "static_custom_path", [])]
print(json.dumps({"disabled": sorted(page["disabledExtensions"]), "locked": sorted(page.get("lockedExtensions", [])),
                  "server": sorted(name for name, on in server.items() if on), "lab_settings": overrides,
                  "culling": dict(settings.get("MappingKernelManager", {})),
                  "lab_app": dict(settings.get("LabApp", {})),
                  "custom_css": next((open(path).read() for path in css if os.path.exists(path)), None)}))
"""


def snapshot(*roots: Path) -> dict[str, float]:
    """Path -> mtime for every file below ``roots`` (missing roots are empty)."""
    found = {}
    for root in roots:
        if root.exists():
            for path in [root, *root.rglob("*")]:
                found[str(path)] = path.lstat().st_mtime
    return found


@pytest.fixture(scope="module")
def after_post_build(tmp_path_factory):
    """Run binder/postBuild in a scratch environment; what was enabled before and after, and what changed outside."""
    tmp = tmp_path_factory.mktemp("binder")
    prefix, env = make_scratch_environment(tmp)
    repo = copy_repository(tmp / "repo")
    watched = (VENV_PREFIX / "etc" / "jupyter", VENV_PREFIX / "share" / "jupyter", Path.home() / ".jupyter",
               course.ROOT / "binder", course.ROOT / "autograder.egg-info", Path("/usr/local/etc/jupyter"),
               Path("/etc/jupyter"))
    outside_before = snapshot(*watched)
    before = extension_state(env, repo)
    output = run(["binder/postBuild"], env, repo)
    # After: the listings, and what a learner's and a grader's server would run with, all at once.
    hub_settings = str(course.ROOT / "deploy" / "hub-jupyter-config")
    hub = {**env, "JUPYTER_CONFIG_PATH": hub_settings}
    grader = {**env, "JUPYTER_CONFIG_PATH": os.pathsep.join([str(course.ROOT / "deploy" / "grader-jupyter-config"),
                                                             hub_settings])}
    lab, server, *runtimes = run_together(
        [*LISTINGS, *[["python", "-c", RUNTIME_STATE]] * 3], env, repo, envs=[env, env, env, hub, grader])
    after = parse_lab(lab), parse_server(server)
    runtime = {who: json.loads(text.strip().splitlines()[-1]) for who, text in zip(("learner", "hub", "grader"),
                                                                                  runtimes)}
    return {"env": env, "repo": repo, "prefix": prefix, "before": before, "after": after, "runtime": runtime,
            "output": output, "outside_changed": outside_before != snapshot(*watched)}


@NIGHTLY_ENVIRONMENT
def test_scratch_environment_starts_with_every_nbgrader_part_enabled(after_post_build):
    lab, server_enabled = after_post_build["before"]
    assert "@jupyter/nbgrader" in lab["enabled"]
    assert not lab["disabled"] and not lab["locked"]
    assert DISABLED_SERVER_EXTENSIONS | EXCHANGE_SERVER_EXTENSIONS | KEPT_SERVER_EXTENSIONS <= server_enabled


@NIGHTLY_ENVIRONMENT
def test_post_build_disables_and_locks_exactly_the_instructor_only_lab_plugins(after_post_build):
    lab_before, _ = after_post_build["before"]
    lab, _ = after_post_build["after"]
    assert lab["disabled"] == DISABLED_LAB_PLUGINS | EXCHANGE_LAB_PLUGINS
    assert lab["locked"] == DISABLED_LAB_PLUGINS  # a learner cannot switch them back on in the plugin manager
    assert not KEPT_LAB_PLUGINS & lab["disabled"]
    assert lab["enabled"] == lab_before["enabled"]  # the extension itself (and every other one) stays enabled


@NIGHTLY_ENVIRONMENT
def test_post_build_disables_exactly_the_instructor_only_server_extensions(after_post_build):
    _, server_before = after_post_build["before"]
    _, server_enabled = after_post_build["after"]
    assert server_enabled == server_before - DISABLED_SERVER_EXTENSIONS - EXCHANGE_SERVER_EXTENSIONS
    assert KEPT_SERVER_EXTENSIONS <= server_enabled


@NIGHTLY_ENVIRONMENT
def test_a_learner_server_would_run_without_the_instructor_tools(after_post_build):
    learner = after_post_build["runtime"]["learner"]
    assert set(learner["disabled"]) == DISABLED_LAB_PLUGINS | EXCHANGE_LAB_PLUGINS
    assert set(learner["locked"]) == DISABLED_LAB_PLUGINS
    assert not (DISABLED_SERVER_EXTENSIONS | EXCHANGE_SERVER_EXTENSIONS) & set(learner["server"])
    assert KEPT_SERVER_EXTENSIONS <= set(learner["server"])


@NIGHTLY_ENVIRONMENT
def test_learners_idle_kernels_are_culled_and_lessons_offer_no_validate(after_post_build):
    """Binder gives 2 GB and a lesson's kernel holds 400-600 MB: a kernel that ran nothing for 30 minutes is shut
    down, open tab or not (a learner may read for half an hour between cells, so not sooner). The custom CSS that
    hides Validate on lessons is loaded."""
    learner = after_post_build["runtime"]["learner"]
    assert learner["culling"] == {"cull_idle_timeout": 1800, "cull_interval": 300, "cull_connected": True}
    assert learner["lab_app"] == {"custom_css": True}
    assert learner["custom_css"] == (BINDER / "custom.css").read_text()
    assert 'h1[data-jupyter-id^="Lesson-"]' in learner["custom_css"] and ".validate-button" in learner["custom_css"]


@NIGHTLY_ENVIRONMENT
def test_a_hub_learner_server_would_run_with_the_assignment_list(after_post_build):
    """deploy/: the hub puts deploy/hub-jupyter-config on every user's JUPYTER_CONFIG_PATH."""
    hub = after_post_build["runtime"]["hub"]
    assert set(hub["disabled"]) == DISABLED_LAB_PLUGINS == set(hub["locked"])
    assert not DISABLED_SERVER_EXTENSIONS & set(hub["server"])
    assert KEPT_SERVER_EXTENSIONS | EXCHANGE_SERVER_EXTENSIONS <= set(hub["server"])


@NIGHTLY_ENVIRONMENT
def test_learners_jupyterlab_sends_widget_messages_to_the_main_thread(after_post_build):
    """JupyterLab's default (comms over kernel subshells) lets a widget callback draw concurrently with a running
    cell; matplotlib is not thread-safe, and lesson 07's Run All then fails at random (seen in tests/test_browser.py).
    postBuild installs the override; it must be what JupyterLab would load."""
    wanted = json.loads((BINDER / "jupyterlab-overrides.json").read_text())
    assert wanted["@jupyterlab/apputils-extension:kernels-settings"] == {"commsOverSubshells": "disabled"}
    # and no "Would you like to receive official Jupyter news?" prompt, nor an update check, for learners
    assert wanted["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}
    assert after_post_build["runtime"]["learner"]["lab_settings"] == wanted
    installed = after_post_build["prefix"] / "share/jupyter/lab/settings/overrides.d/autograd-course.json"
    assert json.loads(installed.read_text()) == wanted


@NIGHTLY_ENVIRONMENT
def test_a_grader_server_would_run_with_them(after_post_build):
    """deploy/: the hub points a grader's JUPYTER_CONFIG_PATH at deploy/grader-jupyter-config (which outranks the
    environment's locked settings, unlike `jupyter labextension enable --level=user`)."""
    grader = after_post_build["runtime"]["grader"]
    assert not grader["disabled"] and not grader["locked"]
    assert DISABLED_SERVER_EXTENSIONS | EXCHANGE_SERVER_EXTENSIONS | KEPT_SERVER_EXTENSIONS <= set(grader["server"])


@NIGHTLY_ENVIRONMENT
def test_post_build_writes_its_settings_to_the_environment_prefix(after_post_build):
    prefix = after_post_build["prefix"]
    page_config = (prefix / "etc" / "jupyter" / "labconfig" / "page_config.json").read_text()
    assert json.loads(page_config) == {
        "disabledExtensions": dict.fromkeys(sorted(DISABLED_LAB_PLUGINS | EXCHANGE_LAB_PLUGINS), True),
        "lockedExtensions": dict.fromkeys(sorted(DISABLED_LAB_PLUGINS), True)}
    home_jupyter = Path(after_post_build["env"]["JUPYTER_CONFIG_DIR"])
    assert not (home_jupyter / "labconfig").exists(), "postBuild wrote user-level settings, not --sys-prefix ones"


@NIGHTLY_ENVIRONMENT
def test_post_build_installs_the_course_package_from_the_repository(after_post_build):
    env, repo = after_post_build["env"], after_post_build["repo"]
    where = run(["python", "-c", "import autograder; print(autograder.__file__)"], env, repo)
    assert Path(where.strip()).resolve() == (repo / "autograder" / "__init__.py").resolve()


@NIGHTLY_ENVIRONMENT
def test_post_build_touches_nothing_outside_tmp(after_post_build):
    assert not after_post_build["outside_changed"]


# ------------------------------------------------------------------------------------------------------ start

@pytest.mark.parametrize("files, preset, expected", [
    ({"cpu.max": "150000 100000\n"}, None, "2"),                       # cgroup v2, 1.5 CPUs -> 2 threads
    ({"cpu.max": "100000 100000\n"}, None, "1"),
    ({"cpu.max": "max 100000\n"}, None, ""),                           # no quota: leave the default
    ({"cpu/cpu.cfs_quota_us": "50000\n", "cpu/cpu.cfs_period_us": "100000\n"}, None, "1"),   # cgroup v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None, ""),
    ({}, None, ""),                                                     # no cgroup files at all
    ({"cpu.max": "100000 100000\n"}, "3", "3"),                        # a value set by the deployment wins
])
def test_start_limits_threads_to_the_cpu_quota_and_runs_the_command(tmp_path, files, preset, expected):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["COURSE_CGROUP_ROOT"] = str(tmp_path)
    if preset:
        env["OMP_NUM_THREADS"] = preset
    done = subprocess.run([str(BINDER / "start"), "sh", "-c", 'printf "%s|%s" "${OMP_NUM_THREADS:-}" "$1"', "sh",
                           "argument kept"], env=env, capture_output=True, text=True, check=True)
    assert done.stdout == f"{expected}|argument kept"
