"""A real JupyterHub for the tests (issue 36): the course's hub settings loaded unchanged, real Unix accounts, the
local nbgrader exchange, jupyterhub-idle-culler as the hub's service.

:func:`start_hub` needs root (it creates the accounts ``learner01``, ``learner02`` and ``grader-autograd-course``,
the course at ``/srv/autograd-course`` where ``deploy/jupyterhub_config.d/autograd-course.py`` expects it, the
exchange ``/srv/nbgrader/exchange`` and ``/etc/jupyter/nbgrader_config.py`` as TLJH's installer does) and refuses to
touch any of them that it did not make itself; it removes everything it made when it stops. The learners' servers run
the course's own environment (``.venv``): when the repository lies in a private (0700) folder, the folders above it
get the permission to be passed through (o+x, not to be listed) for the hub's run, and their modes are put back
afterwards.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from autograder import course

COURSE_DIR = Path("/srv/autograd-course")
EXCHANGE = Path("/srv/nbgrader/exchange")
NBGRADER_CONFIG = Path("/etc/jupyter/nbgrader_config.py")
LEARNERS = ("learner01", "learner02")
GRADER = "grader-autograd-course"
#: What marks a path or account as the test's own (it never removes anything without it).
MARK = ".autograd-hub-test"
PROXY = shutil.which("configurable-http-proxy") or "/usr/bin/configurable-http-proxy"
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"
#: The culler's idle time in the test (the course's hubs: TLJH's 3600 s default, Z2JH's cull.timeout).
CULL_SECONDS = 40
#: How often, in the test, a server and the proxy report activity to the hub (seconds).
ACTIVITY_SECONDS = 5


class HubUnavailable(Exception):
    """Why this machine cannot run the hub test (the reason a skip gives)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def require_hub(reason: str) -> None:
    """Skip a hub test with ``reason``; in CI fail instead, unless .ci/run said why the hub cannot run
    (COURSE_NO_HUB)."""
    import pytest

    if os.environ.get("COURSE_NO_HUB"):
        pytest.skip(f"{reason}; {os.environ['COURSE_NO_HUB']}")
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; in CI the hub test must run, not skip")
    pytest.skip(reason)


def why_not(accounts: tuple[str, ...] = ()) -> str | None:
    """None when a hub can be started here (with the extra ``accounts``), else the reason."""
    if os.geteuid() != 0:
        return "the hub test creates Unix accounts and runs servers as them: it needs root"
    if not shutil.which("useradd"):
        return "no useradd on this machine"
    if not Path(PROXY).exists():
        return f"no configurable-http-proxy ({PROXY}): `npm install -g configurable-http-proxy` (.ci/run does)"
    for name in (*LEARNERS, GRADER, *accounts):
        try:
            pwd.getpwnam(name)
            return f"an account named {name} exists already: the hub test never touches real accounts"
        except KeyError:
            pass
    for path in (COURSE_DIR, EXCHANGE.parent, NBGRADER_CONFIG):
        if path.exists():
            return f"{path} exists already: the hub test never touches a real hub's files"
    return None


@dataclass
class Hub:
    url: str
    token: str  # an admin service's API token
    password: str  # every account's (DummyAuthenticator)
    folder: Path
    api_url: str = ""  # the hub's own API, as a server (or a terminal in it) reaches it
    process: subprocess.Popen | None = None
    made: list = field(default_factory=list)  # what to undo, newest last: ("user", name) / ("path", p) / ("mode", p, m)

    def api(self, method: str, path: str, body: dict | None = None, token: str | None = None):
        request = urllib.request.Request(f"{self.url}/hub/api/{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"token {token or self.token}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            data = response.read()
        return json.loads(data) if data else None

    def user_token(self, name: str) -> str:
        return self.api("POST", f"users/{name}/tokens", {"note": "hub test", "expires_in": 3600})["token"]

    def start_server(self, name: str, timeout: float = 180) -> None:
        """Her server started and ready. Asked again whenever it is neither running nor on its way: a request made
        while the culler was stopping it is refused (400, "pending stop"), and the server then stops."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            server = self.api("GET", f"users/{name}")["servers"].get("", {})
            if server.get("ready"):
                return
            if not server.get("pending"):  # stopped (or never started): ask for it
                try:
                    self.api("POST", f"users/{name}/server")
                except urllib.error.HTTPError as error:
                    if error.code != 400:  # 400: already running, or still stopping (asked again next time)
                        raise
            time.sleep(0.5)
        raise AssertionError(f"{name}'s server did not start: {self.log()[-3000:]}")

    def server(self, name: str, method: str, path: str, token: str, body: dict | None = None):
        """A request to ``name``'s own server, through the hub's proxy, with ``token``."""
        request = urllib.request.Request(f"{self.url}/user/{name}/{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"token {token}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            data = response.read()
        return json.loads(data) if data else None

    def log(self) -> str:
        return (self.folder / "jupyterhub.log").read_text(errors="replace")


def as_user(name: str, command: str, cwd: str | None = None, check: bool = True,
            **extra: str) -> subprocess.CompletedProcess:
    """``command`` in a shell of account ``name`` (runuser), the course's environment on PATH, and ``extra``
    variables (a terminal of the user's hub server has JUPYTERHUB_API_URL and JUPYTERHUB_API_TOKEN)."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": pwd.getpwnam(name).pw_dir,
           "USER": name, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", **extra}
    done = subprocess.run([RUNUSER, "-u", name, "--", "bash", "-c", command], cwd=cwd or env["HOME"], env=env,
                          capture_output=True, text=True, timeout=600)
    if check and done.returncode:
        raise AssertionError(f"as {name}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


def _as_in_the_working_tree(copy: Path) -> None:
    """The course's files as they are in the working tree, committed in ``copy`` (what the hub serves and the grader
    clones is what is being tested, uncommitted changes included)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=course.ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = course.ROOT / name
        if source.is_file() and not source.is_symlink():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    git = ["git", "-c", "user.name=hub test", "-c", "user.email=hub@test.invalid"]
    subprocess.run([*git, "commit", "--quiet", "--allow-empty", "-am", "the working tree under test"], cwd=copy,
                   check=True)


def _open_path_to(path: Path, hub: Hub) -> None:
    """Let every account pass through the folders above ``path`` (o+x), remembering each mode changed."""
    for folder in [*reversed(path.parents), path]:
        mode = stat.S_IMODE(folder.stat().st_mode)
        if not mode & stat.S_IXOTH:
            hub.made.append(("mode", folder, mode))
            folder.chmod(mode | stat.S_IXOTH)


def _config(hub: Hub, ports: dict[str, int], admin_token: str, extra: str = "") -> Path:
    venv = Path(sys.executable).parent
    text = f'''# The hub of tests/test_hub.py: the course's own settings, then only what a test machine needs.
c = get_config()  # noqa: F821
load_subconfig("{COURSE_DIR}/deploy/jupyterhub_config.d/autograd-course.py")  # noqa: F821 - unchanged
c.JupyterHub.bind_url = "http://127.0.0.1:{ports['public']}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{ports['hub']}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{ports['proxy']}"
c.ConfigurableHTTPProxy.command = ["{PROXY}"]
c.JupyterHub.db_url = "sqlite:///{hub.folder / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = "{hub.folder / 'cookie_secret'}"
c.JupyterHub.pid_file = "{hub.folder / 'jupyterhub.pid'}"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = "{hub.password}"
c.Authenticator.allow_all = True
c.Spawner.cmd = ["{venv / 'jupyterhub-singleuser'}"]
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
# Activity reaches the hub every few seconds (both default to 300 s): with the culler's short idle time, a server in
# use (a JupyterLab window polling it) is never taken for an idle one, while one nobody uses still is.
c.JupyterHub.last_activity_interval = {ACTIVITY_SECONDS}
c.Spawner.environment = {{**c.Spawner.environment, "JUPYTERHUB_ACTIVITY_INTERVAL": "{ACTIVITY_SECONDS}"}}
c.JupyterHub.services = [
    {{"name": "test-admin", "api_token": "{admin_token}"}},
    {{"name": "idle-culler", "command": ["{sys.executable}", "-m", "jupyterhub_idle_culler",
                                        "--timeout={CULL_SECONDS}", "--cull-every=10"]}},
]
c.JupyterHub.load_roles = [*c.JupyterHub.load_roles,
    {{"name": "test-admin", "scopes": ["admin:users", "admin:servers", "tokens", "access:servers", "list:users",
                                      "read:hub", "read:users"], "services": ["test-admin"]}},
    {{"name": "idle-culler", "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
     "services": ["idle-culler"]}},
]
''' + extra
    path = hub.folder / "jupyterhub_config.py"
    path.write_text(text)
    return path


def image_settings(account: str) -> None:
    """What binder/postBuild puts into the image's environment, in the account's ~/.jupyter: the user servers run
    the course's .venv, on which postBuild has not run, so each account gets the same settings a level above (the
    hub's own, deploy/hub-jupyter-config, and the graders' still come first on JUPYTER_CONFIG_PATH)."""
    from test_deploy import post_build_disables

    plugins, modules = post_build_disables("instructor")
    exchange_plugins, exchange_modules = post_build_disables("exchange")
    entry = pwd.getpwnam(account)
    folder = os.path.join(entry.pw_dir, ".jupyter")
    settings = {"labconfig/page_config.json": {"disabledExtensions": dict.fromkeys(plugins | exchange_plugins, True),
                                                "lockedExtensions": dict.fromkeys(plugins, True)}}
    for module in modules | exchange_modules:  # where `jupyter server extension disable` writes
        settings[f"jupyter_server_config.d/{module}.json"] = {"ServerApp": {"jpserver_extensions": {module: False}}}
    for name, content in settings.items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as file:
            json.dump(content, file)
    for root, folders, files in os.walk(folder):
        for name in [root, *(os.path.join(root, f) for f in folders + files)]:
            shutil.chown(name, entry.pw_uid, entry.pw_gid)


def start_hub(folder: Path, extra_config: str = "", accounts: tuple[str, ...] = ()):
    """Yield a running :class:`Hub`; undo everything it made afterwards. ``extra_config``: lines appended to the
    hub's config (tests/test_lti.py loads the LTI settings there); ``accounts``: more Unix accounts to make."""
    reason = why_not(accounts)
    if reason:
        raise HubUnavailable(reason)
    hub = Hub("", "", secrets.token_hex(12), folder)
    try:
        for name in (*LEARNERS, GRADER, *accounts):
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--comment", MARK, name], check=True,
                           capture_output=True)
            hub.made.append(("user", name))
            image_settings(name)
        COURSE_DIR.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(course.ROOT), str(COURSE_DIR)], check=True)
        hub.made.append(("path", COURSE_DIR))
        _as_in_the_working_tree(COURSE_DIR)
        (COURSE_DIR / MARK).touch()
        EXCHANGE.mkdir(parents=True)
        hub.made.append(("path", EXCHANGE.parent))
        EXCHANGE.chmod(0o1777)
        if not NBGRADER_CONFIG.parent.exists():
            NBGRADER_CONFIG.parent.mkdir(parents=True)
            hub.made.append(("path", NBGRADER_CONFIG.parent))
        shutil.copy2(COURSE_DIR / "deploy" / "nbgrader_config.py", NBGRADER_CONFIG)
        hub.made.append(("path", NBGRADER_CONFIG))
        _open_path_to(Path(sys.executable).resolve().parent, hub)
        _open_path_to(course.ROOT, hub)
        ports = {name: free_port() for name in ("public", "hub", "proxy")}
        hub.token = secrets.token_hex(24)
        hub.url = f"http://127.0.0.1:{ports['public']}"
        hub.api_url = f"http://127.0.0.1:{ports['hub']}/hub/api"
        config = _config(hub, ports, hub.token, extra_config)
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        with open(folder / "jupyterhub.log", "w") as log:
            hub.process = subprocess.Popen([str(Path(sys.executable).parent / "jupyterhub"), "-f", str(config)],
                                           cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while True:
            try:
                hub.api("GET", "info")
                break
            except (OSError, urllib.error.HTTPError):
                if hub.process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the hub did not start:\n{hub.log()[-4000:]}") from None
                time.sleep(0.5)
        yield hub
    finally:
        stop(hub)


def stop(hub: Hub) -> None:
    if hub.process is not None and hub.process.poll() is None:
        hub.process.terminate()
        try:
            hub.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            hub.process.kill()
    for name in [what[0] for kind, *what in hub.made if kind == "user"]:  # their servers, if the hub left any
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
    while hub.made:
        kind, *what = hub.made.pop()
        if kind == "user":
            subprocess.run(["userdel", "--remove", what[0]], capture_output=True)
        elif kind == "path":
            shutil.rmtree(what[0], ignore_errors=True) if what[0].is_dir() else what[0].unlink(missing_ok=True)
        elif kind == "mode":
            what[0].chmod(what[1])
