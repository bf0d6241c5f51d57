"""A term on a real JupyterHub (issue 36): the course's hub settings loaded unchanged (tests/hub.py), real Unix
accounts for two learners and the grader, nbgrader's exchange, the idle culler as the hub's service.

The grader releases exercise 01 from a clone of the course, as deploy/README.md says. In Chromium, through the hub's
own pages: learner01 signs in on the hub's login page, fetches the assignment with the Assignments panel's button,
solves Part A, presses Validate and Submit; the grader signs in and has the formgrader. Learner02 submits the
untouched release (through the requests the panel makes); the grader collects, grades with ``python -m autograder
grade`` (sandboxed, as the grader) and releases the feedback; learner01 fetches hers with the panel's Fetch Feedback
button, and each learner finds her own score. Learner02 cannot read or overwrite learner01's submission or feedback,
from a shell of her own. An idle server is stopped by the culler. Where Chromium is missing (outside CI) learner01's
steps go through the panel's requests instead.

The test needs root (tests/hub.py says what it creates and removes); elsewhere it skips with the reason, and in CI
(CI=true) it fails unless .ci/run said why the hub cannot run (COURSE_NO_HUB).
"""

from __future__ import annotations

import json
import shlex
import time
import urllib.error
from pathlib import Path

import nbformat
import pytest
from hub import COURSE_DIR, CULL_SECONDS, EXCHANGE, GRADER, HubUnavailable, as_user, require_hub, start_hub
from submissions import solution_sources

COURSE = "autograd-course"
ASSIGNMENT = "01-chain-rule"
A, B = "learner01", "learner02"

pytestmark = pytest.mark.xdist_group("hub")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hub")
    folder.chmod(0o755)
    try:
        yield from start_hub(folder)
    except HubUnavailable as unavailable:
        require_hub(str(unavailable))


class Term:
    """What the term's steps leave for the tests to look at."""

    def __init__(self, hub):
        self.hub = hub
        self.tokens = {}
        self.lists = {}

    def token(self, user: str) -> str:
        if user not in self.tokens:
            self.tokens[user] = self.hub.user_token(user)
        return self.tokens[user]

    def terminal(self, user: str, command: str, check: bool = True):
        """``command`` as ``user`` with what a terminal of her hub server has (the hub's API and her token)."""
        return as_user(user, command, check=check, JUPYTERHUB_API_URL=self.hub.api_url,
                       JUPYTERHUB_API_TOKEN=self.token(user), JUPYTERHUB_USER=user)

    def call(self, user: str, method: str, path: str, body: dict | None = None):
        """A request to her server, started first if the culler stopped it meanwhile (as her next visit would)."""
        if not self.hub.api("GET", f"users/{user}")["servers"].get("", {}).get("ready"):
            self.hub.start_server(user)
        return self.hub.server(user, method, path, self.token(user), body)

    def assignments(self, user: str, action: str | None = None) -> list[dict]:
        """The learner's Assignments list (what the panel shows), after ``action`` (fetch, submit, fetch_feedback),
        as the panel asks her server."""
        if action is None:
            found = self.call(user, "GET", f"assignments?course_id={COURSE}")
        else:
            found = self.call(user, "POST", f"assignments/{action}", {"course_id": COURSE, "assignment_id": ASSIGNMENT})
        assert found["success"], found
        return found["value"]

    def notebook_path(self, user: str) -> str:
        """Where her fetched notebook is, relative to her server's root (her home)."""
        return f"{COURSE}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"


def grader_commands() -> tuple[str, str]:
    """deploy/README.md's commands for the grader account, as one shell line each: those before the learners' turn
    (clone, release) and those after it (collect, grade, release the feedback, export), with the clone made from the
    hub's copy of the course and a grading seed of this test's."""
    readme = (COURSE_DIR / "deploy" / "README.md").read_text()
    section = readme.split("## The grader account", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    before, after = block.split("# ... learners", 1)
    after = after.split("\n", 1)[1]

    def commands(text: str) -> str:
        lines = [line.split("  #", 1)[0].strip() for line in text.splitlines()]
        return " && ".join(line for line in lines if line and not line.startswith("#"))

    swaps = {"https://github.com/your-org/autograd-course": str(COURSE_DIR), "<this term's secret>": "914"}
    before, after = commands(before), commands(after)
    for text, replacement in swaps.items():
        before, after = before.replace(text, replacement), after.replace(text, replacement)
    return before, after


@pytest.fixture(scope="module")
def term(hub):
    term = Term(hub)
    for user in (A, B, GRADER):
        if not any(u["name"] == user for u in hub.api("GET", "users")):
            hub.api("POST", f"users/{user}")
    hub.start_server(GRADER)
    before, term.after = grader_commands()
    # git trusts a clone of another user's repository (root's copy, here instead of GitHub) only when told to
    term.terminal(GRADER, f"git config --global --add safe.directory /srv/{COURSE}/.git && {before}")
    return term


def test_the_grader_releases_and_the_learners_see_it(term):
    for user in (A, B):
        listed = term.assignments(user)
        assert [(a["assignment_id"], a["status"]) for a in listed] == [(ASSIGNMENT, "released")], (user, listed)


def signed_in(browser, term, user: str):
    """A new browser window in which ``user`` signed in on the hub's own login page and landed in JupyterLab.

    Her server is used first (started if the culler stopped it): a server nobody has used for CULL_SECONDS is culled,
    and one culled while the page loads would leave the window on the hub's "not running" page, whose address also
    ends in /user/NAME/lab. Once JupyterLab is open, its own requests keep the server in use."""
    term.call(user, "GET", "api/contents?content=0")
    hub = term.hub
    window = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    window.goto(f"{hub.url}/hub/login")
    window.fill("#username_input", user)
    window.fill("#password_input", hub.password)
    window.click("#login_submit")
    window.wait_for_url(f"{hub.url}/user/{user}/lab**", timeout=120_000)
    window.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").wait_for(timeout=120_000)
    return window


def nbgrader_menu(window) -> list[str]:
    window.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    window.locator(".lm-Menu-itemLabel").first.wait_for()
    items = window.locator(".lm-Menu-itemLabel").all_inner_texts()
    # closed, so that a click on the menu bar next opens it: an Escape that reached the page before the menu had the
    # keyboard left it open in a loaded CI run (58 checks in 30 s), so a press outside every menu closes it then
    for attempt in range(3):
        window.keyboard.press("Escape")
        try:
            window.locator(".lm-Menu").first.wait_for(state="hidden", timeout=5_000)
            break
        except Exception:
            if attempt == 2:
                raise
            window.mouse.click(1390, 890)  # the status bar's right end: outside every menu
    return items


@pytest.fixture(scope="module")
def browser():
    """Chromium for the term's pages (the tests below that need it skip, with the reason, where it is missing)."""
    from test_browser import launched_chromium

    with launched_chromium() as browser:
        yield browser


def assignment_list(window):
    """Nbgrader → Assignment List, opened (again) in ``window``: the panel as a learner sees it."""
    item = window.locator(".lm-Menu-itemLabel", has_text="Assignment List")
    for attempt in range(3):  # a click that met the menu still closing closes it again: open it once more
        window.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
        try:
            item.wait_for(timeout=10_000)
            break
        except Exception:
            if attempt == 2:
                raise
    item.click()
    listing = window.locator("#nbgrader-assignment-list").last
    listing.locator("#refresh_assignments_list").click()
    return listing


def test_through_the_hubs_own_pages_in_chromium(term, hub, browser):
    """In Chromium: learner01 signs in on the hub's login page, lands in JupyterLab, opens Nbgrader → Assignment List,
    sees 01-chain-rule released and fetches it with the panel's button, with no formgrader in her menu; she solves
    Part A (written into her copy through her server, as her typing would), presses the panel's Validate (the dialog
    names the failing tests of the parts she has not written) and Submit. The grader signs in and has the formgrader.
    Screenshots of each step in artifacts/browser/ (hub-*.png)."""
    from test_browser import screenshot

    learner = signed_in(browser, term, A)
    term.window = learner
    screenshot(learner, "hub-learner-signed-in")
    menu = nbgrader_menu(learner)
    assert "Assignment List" in menu and "Formgrader" not in menu, menu
    listing = assignment_list(learner)
    listing.get_by_text(ASSIGNMENT).first.wait_for(timeout=60_000)
    screenshot(learner, "hub-learner-assignment-list")
    assert "Released assignments" in listing.inner_text()
    listing.get_by_role("button", name="Fetch").first.click()  # nbgrader's own panel fetches it for her
    fetched = listing.locator("#fetched_assignments_list")
    fetched.get_by_text(ASSIGNMENT).first.wait_for(timeout=60_000)
    screenshot(learner, "hub-learner-fetched")
    solve_part_a(term, A)
    fetched.locator(".assignment-notebooks-link").first.click()  # the assignment's notebooks, each with Validate
    fetched.get_by_role("button", name="Validate").first.click()
    dialog = learner.locator(".jp-Dialog-content", has_text="Validation Results")
    dialog.wait_for(timeout=120_000)
    screenshot(learner, "hub-learner-validated")
    shown = dialog.inner_text()  # the cells that failed: Parts B and C (not written), not Part A
    assert "check_routes" in shown and "check_worst_relative_error" in shown, shown[:500]
    assert "check_central_difference" not in shown, shown[:500]
    dialog.get_by_role("button", name="Ok").click()
    fetched.get_by_role("button", name="Submit").first.click()
    listing.locator("#submitted_assignments_list").get_by_text(ASSIGNMENT).first.wait_for(timeout=60_000)
    screenshot(learner, "hub-learner-submitted")
    grader = signed_in(browser, term, GRADER)
    menu = nbgrader_menu(grader)
    assert "Formgrader" in menu, menu
    screenshot(grader, "hub-grader-signed-in")
    grader.context.close()


def solve_part_a(term, user: str) -> str:
    """Part A of her fetched copy solved (the reference's answer, as she would type it); the rest left as released.
    Returns the notebook's path on her server."""
    path = term.notebook_path(user)
    model = term.call(user, "GET", f"api/contents/{path}?content=1&type=notebook")
    notebook = nbformat.from_dict(model["content"])
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "central_difference":
            cell.source = solution_sources(ASSIGNMENT)["central_difference"]
    term.call(user, "PUT", f"api/contents/{path}", {"type": "notebook", "format": "json", "content": notebook})
    return path


def test_a_learner_solves_validates_and_submits(term, hub):
    """Where Chromium did not run the term (it is missing outside CI), the same steps through the requests the
    panel makes; in CI this checks what the pages left: her copy fetched and submitted."""
    if getattr(term, "window", None) is None:
        fetched = term.assignments(A, "fetch")
        assert [a["status"] for a in fetched] == ["fetched"], fetched
        path = solve_part_a(term, A)
        validated = term.call(A, "POST", "assignments/validate", {"path": path})
        assert validated["success"], validated
        failed = [f["source"] for f in validated["value"].get("failed", [])]  # Validate: Parts B and C not written
        assert failed and not [source for source in failed if "central_difference" in source], failed
        term.assignments(A, "submit")
    assert {a["status"] for a in term.assignments(A)} >= {"fetched", "submitted"}


def test_another_learner_submits_the_untouched_release(term):
    term.assignments(B, "fetch")
    assert "submitted" in [a["status"] for a in term.assignments(B, "submit")]


def test_the_grader_collects_grades_and_releases_feedback(term):
    done = term.terminal(GRADER, f"cd ~/{COURSE} && {term.after}")
    term.graded = done.stdout
    assert "2 graded, 0 could not be graded" in done.stdout, done.stdout


def test_each_learner_fetches_her_own_feedback_and_score(term, hub):
    """Learner01 fetches hers with the panel's Fetch Feedback button (in Chromium, where the term ran there), learner02
    through the panel's request; each finds her own score in her own feedback page."""
    window = getattr(term, "window", None)
    if window is not None:
        from test_browser import screenshot

        term.call(A, "GET", "api/contents?content=0")  # her server in use again (the culler's idle time is short)
        window.reload()
        window.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").wait_for(timeout=120_000)
        submitted = assignment_list(window).locator("#submitted_assignments_list")
        submitted.get_by_text("feedback available to fetch").first.wait_for(timeout=60_000)
        submitted.get_by_role("button", name="Fetch Feedback").first.click()
        submitted.get_by_text("view feedback").first.wait_for(timeout=60_000)
        screenshot(window, "hub-learner-feedback")
    for user, score in ((A, "4.0 / 12.0"), (B, "0.0 / 12.0")):
        listed = term.assignments(user) if (user == A and window is not None) else term.assignments(user,
                                                                                                   "fetch_feedback")
        assert '"has_local_feedback": true' in json.dumps(listed), listed
        home = Path(f"/home/{user}")
        pages = list((home / COURSE / ASSIGNMENT / "feedback").glob("*/*.html"))
        assert len(pages) == 1, pages
        text = pages[0].read_text()
        assert f"Score: {score}" in text and user in json.dumps(listed), (user, text[:300])


def test_no_learner_reads_or_overwrites_anothers_work(term):
    """What a learner can try from a terminal of her own server. nbgrader's exchange keeps submissions apart by
    names nobody can list or guess: the inbound folder can be written into but not read (mode 2733), and each
    submission's folder is named learner+assignment+timestamp+12 random characters; feedback files are named by a
    hash of the submission. Her home, which holds her working copy and her fetched feedback, is hers alone."""
    inbound = EXCHANGE / COURSE / "inbound"
    hers = sorted(p for p in inbound.iterdir() if p.name.startswith(f"{A}+"))
    assert hers, "learner01's submission is in the exchange"
    stamp = hers[0].name.rsplit("+", 1)[0]  # everything but the random part: what another learner might guess
    attempts = {
        "list the submissions": f"ls {inbound}",
        "find hers by pattern": f"cat {inbound}/{A}+*/{ASSIGNMENT}.ipynb",
        "open a guessed name": f"cat {shlex.quote(f'{inbound}/{stamp}+000000000000/{ASSIGNMENT}.ipynb')}",
        "list the released feedback": f"ls {EXCHANGE / COURSE / 'feedback'}",
        "read her home": f"ls /home/{A}",
        "read her working copy": f"cat /home/{A}/{COURSE}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb",
        "read her feedback": f"cat /home/{A}/{COURSE}/{ASSIGNMENT}/feedback/*/*.html",
        "overwrite her working copy": f"echo '{{}}' > /home/{A}/{COURSE}/{ASSIGNMENT}/{ASSIGNMENT}.ipynb",
    }
    for what, command in attempts.items():
        done = term.terminal(B, command, check=False)
        assert done.returncode != 0, f"learner02 could {what}: {done.stdout[:300]}"
    for submission in hers:
        assert json.loads((submission / f"{ASSIGNMENT}.ipynb").read_text())["cells"], "her submission is intact"


def test_an_idle_server_is_culled(term, hub):
    deadline = time.monotonic() + CULL_SECONDS + 90
    while time.monotonic() < deadline:
        servers = hub.api("GET", f"users/{B}")["servers"]
        if not servers:
            return
        time.sleep(5)
    pytest.fail(f"learner02's idle server was not culled within {CULL_SECONDS} s + 90 s:\n{hub.log()[-2000:]}")


def test_a_server_that_is_gone_answers_no_more(term, hub):
    with pytest.raises(urllib.error.HTTPError):
        hub.server(B, "GET", "api/status", term.token(B))
