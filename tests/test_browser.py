"""The course in a real browser, the way a learner uses it: JupyterLab in Debian's Chromium, driven by Playwright.

A fixture starts ``jupyter lab`` on 127.0.0.1 (a free port, a random token, no browser) on a scratch copy of the
lessons and exercises, with HOME and every Jupyter directory under tmp and what binder/postBuild gives learners: no
formgrader, create-assignment or course list (Validate kept), and widget messages on the kernel's main thread
(binder/jupyterlab-overrides.json; without it, lesson 07's Run All failed here once with matplotlib's
"ParseException: exception raised in parse action" — a slider redraw racing a cell's plot on another thread). Then:

* every lesson opens from the file browser, Run > Run All Cells completes (kernel idle, every code cell numbered),
  no cell shows an error, and the notebook saved by the toolbar's Save button holds no error output; a screenshot
  of each is saved under artifacts/browser/ (git-ignored). Two lessons run at a time, in two JupyterLab windows;
* in lesson 07, moving the "depth" slider redraws the plot;
* in exercise 01, the untouched test cell shows the failure; after typing the reference solution into the solution
  cells, running the tests shows no failure, and the nbgrader Validate button reports success.

Chromium comes from Debian (`apt-get install -y chromium`, done by .ci/run); `playwright install` is never used.
Without /usr/bin/chromium the tests skip with the reason; in CI (CI=true) they fail unless .ci/run tried to install
Chromium and could not (it then sets COURSE_NO_BROWSER to its reason).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from submissions import grade_id, solution_sources

from autograder import course

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
ARTIFACTS = course.ROOT / "artifacts" / "browser"
LESSONS = course.lessons()
EXERCISE = "01-chain-rule"
#: Generous limits for a loaded 2-core machine; a lesson itself runs in well under 30 s.
RUN_ALL_TIMEOUT_MS = 180_000
OPEN_TIMEOUT_MS = 90_000

pytestmark = pytest.mark.xdist_group("browser")  # one JupyterLab and one browser for the whole module


def require_chromium() -> None:
    if CHROMIUM.exists():
        return
    reason = f"no Chromium at {CHROMIUM}: `apt-get install -y chromium` (.ci/run installs it)"
    if os.environ.get("COURSE_NO_BROWSER"):  # .ci/run tried and says why it could not
        pytest.skip(f"{reason}; {os.environ['COURSE_NO_BROWSER']}")
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; in CI the browser tests must run, not skip")
    pytest.skip(reason)


def post_build_disables() -> tuple[list[str], list[str]]:
    """The lab plugins and server extensions binder/postBuild switches off for learners, read from the script."""
    text = (course.ROOT / "binder" / "postBuild").read_text()
    plugins = re.search(r"instructor_plugins=\(([^)]*)\)", text).group(1).split()
    modules = re.findall(r"nbgrader\.server_extensions\.\w+", text.split("server extension disable")[1])
    return plugins, modules


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def learner_home(tmp: Path) -> dict[str, str]:
    """HOME, Jupyter dirs and JupyterLab settings under tmp; the learners' extension set via JUPYTER_CONFIG_PATH."""
    home = tmp / "home"
    settings = home / "lab-settings" / "@jupyterlab"
    for path, data in {
        # Render every cell (JupyterLab 4 otherwise renders only those in view), so the page can be checked whole.
        settings / "notebook-extension" / "tracker.jupyterlab-settings": {"windowingMode": "none"},
        # No "receive Jupyter news?" toast over the notebook, and no update check (no network here).
        settings / "apputils-extension" / "notification.jupyterlab-settings": {"fetchNews": "false",
                                                                              "checkForUpdates": False},
    }.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    # binder/postBuild's JupyterLab settings (widget messages on the kernel's main thread), as an app settings dir.
    overrides = tmp / "app-settings" / "overrides.d"
    overrides.mkdir(parents=True)
    shutil.copy2(course.ROOT / "binder" / "jupyterlab-overrides.json", overrides / "autograd-course.json")
    plugins, modules = post_build_disables()
    learner = tmp / "learner-config"
    (learner / "labconfig").mkdir(parents=True)
    (learner / "labconfig" / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": dict.fromkeys(plugins, True), "lockedExtensions": dict.fromkeys(plugins, True)}))
    (learner / "jupyter_server_config.d").mkdir()
    (learner / "jupyter_server_config.d" / "learner.json").write_text(json.dumps(
        {"ServerApp": {"jpserver_extensions": dict.fromkeys(modules, False)}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHON", "MPL"))}
    env.update({
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(home / ".jupyter"),
        "JUPYTER_CONFIG_PATH": str(learner),
        "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(home / ".local" / "share" / "jupyter" / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "lab-workspaces"),
        "IPYTHONDIR": str(home / ".ipython"),
        "MPLCONFIGDIR": str(home / ".config" / "matplotlib"),
        "OMP_NUM_THREADS": "1",
    })
    return env


class Lab:
    def __init__(self, url: str, token: str, root: Path, process: subprocess.Popen, log: Path):
        self.url, self.token, self.root, self.process, self.log = url, token, root, process, log

    def address(self, path: str) -> str:
        """A fresh JupyterLab window on ``path``: its own workspace, reset, so that no window restores the tabs
        another one left open (workspaces are kept on the server)."""
        return f"{self.url}/lab/workspaces/w{secrets.token_hex(6)}/tree/{path}?reset&token={self.token}"

    def api(self, method: str, path: str):
        request = urllib.request.Request(f"{self.url}/{path if path.startswith('lab/') else 'api/' + path}",
                                         method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shut_down_kernels(self) -> None:
        for session in self.api("GET", "sessions"):
            self.api("DELETE", f"sessions/{session['id']}")


def start_lab(tmp: Path, *, instructor: bool = False):
    """``jupyter lab`` on a scratch copy of the lessons and exercises, as a learner (what `make lab` and Binder give)
    or, with ``instructor``, as `make lab-instructor` gives it: the hub's grader settings first on
    JUPYTER_CONFIG_PATH. Yields the running Lab."""
    root = tmp / "root"
    root.mkdir()
    for name in ("lessons", "exercises"):
        shutil.copytree(course.ROOT / name, root / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copy2(course.ROOT / "nbgrader_config.py", root / "nbgrader_config.py")  # Validate reads it
    token, port = secrets.token_hex(24), free_port()
    log = tmp / "jupyter-lab.log"
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
               f"--ServerApp.root_dir={root}", f"--LabApp.app_settings_dir={tmp / 'app-settings'}", "--allow-root"]
    env = learner_home(tmp)
    if instructor:
        grader = course.ROOT / "deploy" / "grader-jupyter-config"
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(grader), env["JUPYTER_CONFIG_PATH"]])
    with open(log, "w") as output:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=output, stderr=subprocess.STDOUT)
    server = Lab(f"http://127.0.0.1:{port}", token, root, process, log)
    deadline = time.monotonic() + 120
    while True:
        try:
            server.api("GET", "status")
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"jupyter lab did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.25)
    yield server
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_chromium()
    yield from start_lab(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, lab):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    yield page
    context.close()
    lab.shut_down_kernels()


# ------------------------------------------------------------------------------------------- what a person does

#: Run in the page: True once the current notebook has loaded (no spinner) and its Python kernel is idle.
OPENED = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    if (!panel || panel.querySelector('.jp-Spinner') || !panel.querySelector('.jp-Notebook .jp-Cell')) return false;
    const status = panel.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status;
    const toolbar = panel.querySelector('.jp-Toolbar')?.textContent || '';
    return status === 'idle' && toolbar.includes('Python 3');
}"""


def open_notebook(page, lab: Lab, path: str) -> None:
    page.goto(lab.address(path))
    page.wait_for_function(OPENED, timeout=OPEN_TIMEOUT_MS, polling=250)


def wait_for_kernel_idle(page, timeout: int) -> None:
    page.wait_for_function(OPENED, timeout=timeout, polling=250)


def menu(page, top: str, entry: str) -> None:
    """Click a menu bar item, then one of its entries, by their labels (e.g. Run > Run All Cells)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{top}$")).click()
    page.locator(".lm-Menu-content > .lm-Menu-item", has=page.locator(
        ".lm-Menu-itemLabel", has_text=re.compile(rf"^{re.escape(entry)}$"))).click()


#: Run in the page: True once nothing is running ("[*]") and the kernel is idle.
ALL_SETTLED = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    const status = panel.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status;
    const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent);
    return status === 'idle' && prompts.length > 0 && !prompts.some(p => p.includes('*'));
}"""


#: Run in the page: True once Run All has been taken up (cells queued "[*]" or already numbered).
STARTED = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')].map(p => p.textContent);
    return prompts.some(p => /\\[(\\*|\\d+)\\]/.test(p));
}"""


def run_all(page) -> None:
    start_run_all(page)
    finish_run_all(page)


def start_run_all(page) -> None:
    """Run > Run All Cells, and wait until the kernel has taken the cells up."""
    before = code_cell_prompts(page)
    menu(page, "Run", "Run All Cells")
    if all(p.strip() == "[ ]:" for p in before):
        page.wait_for_function(STARTED, timeout=30_000, polling=100)
    else:  # a second run: wait until the first cell has been queued again
        page.wait_for_function("(first) => { const p = document.querySelector("
                               "'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputArea-prompt');"
                               " return p && p.textContent !== first; }", arg=before[0], timeout=30_000, polling=100)


def finish_run_all(page) -> None:
    """Wait until every queued cell has run (or been cancelled by an error) and the kernel is idle."""
    page.wait_for_function(ALL_SETTLED, timeout=RUN_ALL_TIMEOUT_MS, polling=250)
    page.wait_for_timeout(300)  # a late output message still being rendered
    page.wait_for_function(ALL_SETTLED, timeout=RUN_ALL_TIMEOUT_MS, polling=250)


def code_cell_prompts(page) -> list[str]:
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()


def shown_errors(page) -> list[str]:
    """Error outputs on the page: tracebacks, as JupyterLab renders them (stderr-style output areas)."""
    texts = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) '
                         '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').all_inner_texts()
    return [t for t in texts if "Traceback" in t or re.search(r"^\w*(Error|Exception)\b", t, re.M)]


def save(page) -> None:
    """The notebook toolbar's Save button; wait until the tab is no longer marked unsaved."""
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar [data-command='docmanager:save']").click()
    page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.lm-mod-current.jp-mod-dirty')",
                           timeout=120_000, polling=250)


def saved_errors(path: Path) -> list[str]:
    notebook = nbformat.read(path, as_version=4)
    return [f"cell {i}: {o.get('ename')}: {o.get('evalue')}" for i, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" for o in cell.get("outputs", []) if o.output_type == "error"]


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(target))
    return target


# --------------------------------------------------------------------------------------------------- the tests

def test_learners_see_validate_but_not_the_instructor_tools(page, lab):
    """The environment is the learners' one: binder/postBuild's extension set and JupyterLab settings."""
    kernels = lab.api("GET", "lab/api/settings/@jupyterlab/apputils-extension:kernels-settings")
    assert kernels["schema"]["properties"]["commsOverSubshells"]["default"] == "disabled"  # the override applied
    assert kernels["settings"].get("commsOverSubshells", "disabled") == "disabled"  # and no user setting undoes it
    open_notebook(page, lab, f"exercises/{EXERCISE}/{EXERCISE}.ipynb")
    assert page.locator(".jp-NotebookPanel .jp-Toolbar", has_text="Validate").count() == 1
    assert page.get_by_text("Create Assignment").count() == 0  # the create-assignment sidebar
    assert page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").count() in (0, 1)
    if page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").count():
        page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
        entries = page.locator(".lm-Menu-content .lm-Menu-itemLabel").all_inner_texts()
        page.keyboard.press("Escape")
        assert not any("Formgrader" in e or "Course" in e for e in entries), entries


def test_make_lab_instructor_gives_the_instructor_tools_back(browser, tmp_path_factory):
    """`make lab-instructor`: the same environment with deploy/grader-jupyter-config first on JUPYTER_CONFIG_PATH."""
    assert 'JUPYTER_CONFIG_PATH="$(CURDIR)/deploy/grader-jupyter-config"' in (course.ROOT / "Makefile").read_text()
    server = start_lab(tmp_path_factory.mktemp("instructor"), instructor=True)
    instructor = next(server)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        open_notebook(page, instructor, f"exercises/{EXERCISE}/{EXERCISE}.ipynb")
        page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
        entries = page.locator(".lm-Menu-content .lm-Menu-itemLabel").all_inner_texts()
        page.keyboard.press("Escape")
        assert any("Formgrader" in e for e in entries) and any("Course" in e for e in entries), entries
        with urllib.request.urlopen(f"{instructor.url}/formgrader?token={instructor.token}", timeout=60) as reply:
            assert reply.status == 200  # the formgrader's server part runs too
    finally:
        context.close()
        instructor.shut_down_kernels()
        next(server, None)


def open_from_file_browser(page, name: str) -> None:
    """Double-click a notebook in the file browser (already showing its folder); wait for its kernel."""
    page.locator(".jp-DirListing-itemText", has_text=re.compile(rf"^{re.escape(name)}$")).dblclick()
    page.wait_for_function(OPENED, timeout=OPEN_TIMEOUT_MS, polling=250)


def close_current_tab(page, lab: Lab, path: str) -> None:
    """Close the notebook's tab (saved, so no question asked) and shut its kernel down."""
    page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabCloseIcon").click()
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden)", state="detached", timeout=30_000)
    for session in lab.api("GET", "sessions"):
        if session["path"] == path:
            lab.api("DELETE", f"sessions/{session['id']}")


@pytest.fixture(scope="module")
def lesson_runs(browser, lab) -> dict[str, dict]:
    """Every lesson run in the browser, two at a time (two JupyterLab windows, one kernel each): open it from the
    file browser, Run All, wait, look at the page, take the screenshot, save, close. Results by lesson name."""
    windows = []
    for _ in range(2):
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        window = context.new_page()
        window.goto(lab.address("lessons"))
        window.wait_for_selector(".jp-DirListing-itemText", timeout=OPEN_TIMEOUT_MS)
        windows.append(window)
    results: dict[str, dict] = {}

    def start(lesson: Path, window) -> None:
        started = time.monotonic()
        results[lesson.name] = {"started": started}
        try:
            open_from_file_browser(window, lesson.name)
            start_run_all(window)
        except Exception as error:  # noqa: BLE001 - reported by the lesson's own test
            results[lesson.name]["failure"] = f"{type(error).__name__}: {error}"
            results[lesson.name]["screenshot"] = screenshot(window, f"{lesson.stem}-FAILED")

    def finish(lesson: Path, window) -> None:
        result = results[lesson.name]
        path = f"lessons/{lesson.name}"
        try:
            if "failure" not in result:
                finish_run_all(window)
                result["prompts"] = code_cell_prompts(window)
                result["errors"] = shown_errors(window)
                result["screenshot"] = screenshot(window, lesson.stem)
                save(window)
                result["saved_errors"] = saved_errors(lab.root / path)
        except Exception as error:  # noqa: BLE001
            result["failure"] = f"{type(error).__name__}: {error}"
            result["screenshot"] = screenshot(window, f"{lesson.stem}-FAILED")
        finally:
            result["seconds"] = time.monotonic() - result["started"]
            try:
                close_current_tab(window, lab, path)
            except Exception:  # noqa: BLE001 - the next lesson in this window will show the problem
                pass

    running: list[tuple[Path, object]] = []
    for number, lesson in enumerate(LESSONS):
        window = windows[number % 2]
        start(lesson, window)
        running.append((lesson, window))
        if len(running) == 2:
            finish(*running.pop(0))
    while running:
        finish(*running.pop(0))
    for window in windows:
        window.context.close()
    return results


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_all_cells_without_an_error(lesson_runs, lesson):
    result = lesson_runs[lesson.name]
    assert "failure" not in result, f"{lesson.name}: {result['failure']} (screenshot: {result.get('screenshot')})"
    errors = result["errors"]
    assert not errors, f"{lesson.name} shows an error (screenshot: {result['screenshot']}):\n" + "\n".join(
        e[-2500:] for e in errors)
    prompts = result["prompts"]
    assert all(re.fullmatch(r"\[\d+\]:", p.strip()) for p in prompts), \
        f"{lesson.name}: Run All did not run every code cell: {prompts}"
    assert result["saved_errors"] == [], "the saved notebook holds error outputs"
    assert result["screenshot"].exists()


@pytest.mark.skipif(not any(p.name.startswith("07-") for p in LESSONS), reason="lesson 07 is not written yet")
def test_lesson_07_slider_redraws_the_plot(page, lab):
    lesson = next(p for p in LESSONS if p.name.startswith("07-"))
    open_notebook(page, lab, f"lessons/{lesson.name}")
    run_all(page)
    slider = page.locator(".widget-slider", has=page.locator(".widget-label", has_text=re.compile(r"^(depth|factor)$")))
    slider.first.wait_for(timeout=30_000)
    cell = page.locator(".jp-CodeCell", has=slider.first)
    images = cell.locator(".jp-OutputArea-output img")
    images.first.wait_for(timeout=30_000)
    before = images.first.get_attribute("src")
    readout = slider.first.locator(".widget-readout").inner_text()
    handle = slider.first.locator(".noUi-handle")
    handle.focus()
    for _ in range(5):
        handle.press("ArrowRight")
    page.wait_for_function("([cell, before]) => { const img = cell.querySelector('.jp-OutputArea-output img');"
                           " return img && img.getAttribute('src') !== before; }",
                           arg=[cell.element_handle(), before], timeout=60_000, polling=200)
    wait_for_kernel_idle(page, 60_000)
    assert slider.first.locator(".widget-readout").inner_text() != readout
    screenshot(page, f"{lesson.stem}-slider-moved")
    assert images.first.get_attribute("src") != before


def test_exercise_typed_solution_passes_its_tests_and_validates(page, lab):
    path = f"exercises/{EXERCISE}/{EXERCISE}.ipynb"
    release = nbformat.read(lab.root / path, as_version=4)
    # What a learner would type: the reference code without nbgrader's solution markers.
    markers = ("### BEGIN SOLUTION", "### END SOLUTION")
    answers = {cell: "\n".join(line for line in code.splitlines() if line.strip() not in markers)
               for cell, code in solution_sources(EXERCISE).items()}
    positions = {grade_id(c): i for i, c in enumerate(release.cells) if grade_id(c)}
    open_notebook(page, lab, path)
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")

    # Untouched, the first test cell fails: the learner sees the NotImplementedError.
    run_all(page)
    assert any("NotImplementedError" in e for e in shown_errors(page))

    # Type the solutions, run everything again: no test cell fails any more.
    for cell_id, code in answers.items():
        editor = cells.nth(positions[cell_id]).locator(".cm-content")
        editor.click()
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(code)
        page.keyboard.press("Escape")
    run_all(page)
    prompts = code_cell_prompts(page)
    assert shown_errors(page) == []
    assert all(re.fullmatch(r"\[\d+\]:", p.strip()) for p in prompts), prompts
    for cell_id in positions:
        if cell_id.startswith("test_"):
            outputs = cells.nth(positions[cell_id]).locator(".jp-OutputArea-output").all_inner_texts()
            assert not any("Error" in o for o in outputs), f"{cell_id}: {outputs}"
    screenshot(page, f"exercise-{EXERCISE}-tests-pass")

    # Validate (saves, then runs nbgrader validate on the server): success.
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar").get_by_text("Validate", exact=True).click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=120_000)
    dialog.locator(".validation-success, .validation-failed, pre").first.wait_for(timeout=120_000)
    screenshot(page, f"exercise-{EXERCISE}-validate")
    assert "Success! Your notebook passes all the tests." in dialog.inner_text(), dialog.inner_text()
    saved = nbformat.read(lab.root / path, as_version=4)
    assert {grade_id(c): c.source for c in saved.cells if grade_id(c) in answers} == answers


# ------------------------------------------------------------------------------------- the backward stepper

STEPPER_CELL = """import torch
from autograder import stepper
x = torch.tensor(2.0, requires_grad=True)
p = 3 * x
q = x ** 2
r = q * p
L = r + p
stepper.show(L, names={x: "x", p: "p", q: "q", r: "r", L: "L"})"""


def engine_schedule() -> tuple[list[str], list[list[int]]]:
    """Lesson 03's expression in this process: the order PyTorch runs its nodes (seen by pre-hooks registered here)
    and, after each step, how many consumers every node still waits for (counted from next_functions)."""
    import torch

    from autograder.graph import topological

    x = torch.tensor(2.0, requires_grad=True)
    p = 3 * x
    q = x**2
    r = q * p
    L = r + p
    names = {L.grad_fn: "L", r.grad_fn: "r", q.grad_fn: "q", p.grad_fn: "p"}
    inputs = lambda fn: [c for c, _ in fn.next_functions if c is not None]  # noqa: E731
    nodes = topological(L.grad_fn, inputs)
    names.update({n: "x" for n in nodes if n not in names})
    ran = []
    for node in nodes:
        node.register_prehook(lambda grads, node=node: ran.append(node))
    L.backward()
    waits = [[sum(1 for consumer in nodes if consumer not in ran[:k] for child in inputs(consumer) if child is node)
              for node in nodes] for k in range(len(ran) + 1)]
    return [names[n] for n in ran], waits


def test_stepper_three_clicks_follow_the_engine(page, lab):
    path = lab.root / "stepper-check.ipynb"
    kernel = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}}
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(STEPPER_CELL)], metadata=kernel), path)
    order, waits = engine_schedule()
    open_notebook(page, lab, path.name)
    run_all(page)
    status = page.locator(".stepper-status")
    status.wait_for(timeout=60_000)
    step = page.locator(".widget-button", has_text="step ▶")

    def shown_waits() -> list[int]:
        return [int(t) for t in page.locator(".stepper-waits").all_inner_texts()]

    assert page.locator(".stepper-running").inner_text() == "nothing yet"
    assert shown_waits() == waits[0]
    image = page.locator(".widget-image").first
    pictures = [image.get_attribute("src")]
    for k in range(1, 4):
        step.click()
        page.wait_for_function("(k) => document.querySelector('.stepper-step')?.textContent === String(k)", arg=k,
                               timeout=30_000, polling=100)
        assert page.locator(".stepper-running").inner_text().split(" = ")[0] == order[k - 1]
        assert shown_waits() == waits[k]
        pictures.append(image.get_attribute("src"))
    screenshot(page, "stepper-after-three-clicks")
    assert len(set(pictures)) == 4, "the picture did not change with every click"
    assert waits[0] != waits[3]


def lesson_path(prefix: str) -> str:
    return f"lessons/{next(p.name for p in LESSONS if p.name.startswith(prefix))}"


@pytest.mark.skipif(not any(p.name.startswith("10-") for p in LESSONS), reason="lesson 10 is not written yet")
def test_lesson_10_proves_every_claim_on_the_page(page, lab):
    """Every verification cell of lesson 10 prints its ✓ line in the browser, and the plots are drawn."""
    path = lesson_path("10-")
    claims = sum(cell.source.count("claim(") + cell.source.count("claim_close(")
                 for cell in nbformat.read(lab.root / path, as_version=4).cells if cell.cell_type == "code")
    open_notebook(page, lab, path)
    run_all(page)
    assert shown_errors(page) == []
    shown = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output").all_inner_texts()
    ticks = sum(text.count("✓ ") for text in shown)
    assert ticks == claims, f"{ticks} ✓ lines shown for {claims} claims"
    assert page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output img").count() >= 1
    screenshot(page, "lesson-10-claims")


def capstone_step_order() -> list[str]:
    """The op names PyTorch runs for lesson 11's one training step (any values: the order depends on the graph)."""
    import torch
    import torch.nn.functional as F

    from autograder.graph import topological

    X, y = torch.randn(5, 64, dtype=torch.float64), torch.tensor([0, 1, 2, 3, 4])
    W1, W2 = (torch.randn(*shape, dtype=torch.float64, requires_grad=True) for shape in ((64, 32), (32, 10)))
    b1, b2 = (torch.zeros(size, dtype=torch.float64, requires_grad=True) for size in (32, 10))
    loss = F.cross_entropy(torch.tanh(X @ W1 + b1) @ W2 + b2, y)
    nodes = topological(loss.grad_fn, lambda fn: [c for c, _ in fn.next_functions if c is not None])
    ran = []
    for node in nodes:
        node.register_prehook(lambda grads, node=node: ran.append(node.name()))
    loss.backward()
    return ran


@pytest.mark.skipif(not any(p.name.startswith("11-") for p in LESSONS), reason="lesson 11 is not written yet")
def test_lesson_11_stepper_follows_one_training_step(page, lab):
    """Lesson 11's second stepper (PyTorch's engine on one step of the digits network): three clicks run the nodes
    in the order PyTorch runs them."""
    order = capstone_step_order()
    open_notebook(page, lab, lesson_path("11-"))
    run_all(page)
    assert shown_errors(page) == []
    steppers = page.locator(".widget-vbox", has=page.locator(".stepper-status"))
    assert steppers.count() == 2, "lesson 11 shows a Value stepper and a PyTorch stepper"
    torch_stepper = steppers.nth(1)
    for k in range(1, 4):
        torch_stepper.locator(".widget-button", has_text="step ▶").click()
        torch_stepper.locator(".stepper-step", has_text=re.compile(rf"^{k}$")).wait_for(timeout=30_000)
        running = torch_stepper.locator(".stepper-running").inner_text()
        assert re.sub(r" #\d+$", "", running.split(" = ")[-1]) == order[k - 1], (k, running, order[:3])
    screenshot(page, "lesson-11-stepper")
