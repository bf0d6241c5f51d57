"""Launching the hub from an LMS with LTI 1.3 (issue 36): deploy/jupyterhub_config.d/lti13.py on a real JupyterHub.

The test plays the LMS (the "platform"): an RSA key of its own, its public keys (a JWKS) and its authorization
endpoint served from a thread, and the browser between it and the hub. A launch is the OpenID Connect third-party
login of LTI 1.3: the LMS posts the login initiation to the hub (/hub/lti13/oauth_login); the hub sends the browser
to the LMS's authorization endpoint with a nonce and a state; the LMS answers with a form that posts the signed
id_token (RS256, the LTI claims) back to the hub (/hub/lti13/oauth_callback), which checks the signature against the
JWKS, the issuer, audience, times and nonce, and signs the person in.

The hub is tests/hub.py's (the course's settings unchanged) with the LTI fragment loaded as a course team would turn
it on, through the environment. A learner's launch lands as her hub user in JupyterLab without the instructor
tools, in the course's learner group; an instructor's launch lands in the grader group, with the tools. A launch
signed with another key, an expired one, one without the login id and one from another deployment are refused
(HTTP 4xx) and make no hub user.

The user servers run the course's .venv, not the hub's image: binder/postBuild (which switches the instructor tools
off in the image's environment) has not run on it. Each account's ~/.jupyter gets the same settings instead, a level
below the hub's own settings just as the image's are, so that "the tools" means the same as on a real hub.

Needs root, like tests/test_hub.py (same skip rules: COURSE_NO_HUB says why it cannot run; in CI it fails instead).
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from hub import GRADER, HubUnavailable, require_hub, start_hub
from test_deploy import HUB_CONFIG, post_build_disables, run_config

from autograder import course

LTI_CONFIG = course.ROOT / "deploy" / "jupyterhub_config.d" / "lti13.py"
COURSE = course.COURSE_ID
CLIENT_ID = "10000000000042"
DEPLOYMENT = "42:course-autograd"
KID = "platform-2026"
LEARNER, INSTRUCTOR, STRANGER = "learner01", "teacher01", "learner02"
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
ROLE = "http://purl.imsglobal.org/vocab/lis/v2/"
LEARNER_ROLES = [f"{ROLE}membership#Learner", f"{ROLE}institution/person#Student",
                 f"{ROLE}institution/person#Instructor"]  # teaches another course: Canvas says so in every launch
INSTRUCTOR_ROLES = [f"{ROLE}membership#Instructor", f"{ROLE}institution/person#Instructor"]

pytestmark = pytest.mark.xdist_group("hub")


class Platform:
    """The LMS: its key, its JWKS, its authorization endpoint. ``launches[login_hint]`` says whom it signs in and
    how (claims to change, another key, times)."""

    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.launches: dict[str, dict] = {}
        self.redirect_uri = ""
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/jwks":
                    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(platform.key.public_key()))
                    self.answer(200, json.dumps({"keys": [{**jwk, "kid": KID, "alg": "RS256", "use": "sig"}]}),
                                "application/json")
                elif url.path == "/authorize":
                    status, body = platform.authorize(dict(urllib.parse.parse_qsl(url.query)))
                    self.answer(status, body, "text/html")
                else:
                    self.answer(404, "not here", "text/plain")

            def answer(self, status, body, kind):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def authorize(self, query: dict) -> tuple[int, str]:
        """The LMS's half of the OIDC login: check the hub's authentication request, then the self-posting form
        that carries the signed id_token to the hub."""
        expected = {"response_type": "id_token", "scope": "openid", "response_mode": "form_post", "prompt": "none",
                    "client_id": CLIENT_ID, "redirect_uri": self.redirect_uri}
        wrong = {k: query.get(k) for k, v in expected.items() if query.get(k) != v}
        launch = self.launches.get(query.get("login_hint", ""))
        if wrong or launch is None or not query.get("nonce") or not query.get("state") or \
                query.get("lti_message_hint") != f"message-{query.get('login_hint')}":
            return 400, f"bad authentication request: {wrong or query}"
        now = int(time.time()) + launch.get("shift", 0)
        claims = {
            "iss": self.url, "aud": CLIENT_ID, "sub": f"lms-opaque-{launch['login']}", "nonce": query["nonce"],
            "iat": now, "exp": now + 300,
            f"{CLAIM}message_type": "LtiResourceLinkRequest", f"{CLAIM}version": "1.3.0",
            f"{CLAIM}deployment_id": DEPLOYMENT, f"{CLAIM}roles": launch["roles"],
            f"{CLAIM}target_link_uri": launch["target"],
            f"{CLAIM}resource_link": {"id": "link-autograd-01", "title": "Autograd course on the hub"},
            f"{CLAIM}context": {"id": "course-4711", "label": "AUTOGRAD", "title": "Autograd"},
            f"{CLAIM}custom": {"login_id": launch["login"]},
            "name": launch["login"].title(), "email": f"{launch['login']}@uni.example",
        }
        claims.update(launch.get("claims", {}))
        token = jwt.encode({k: v for k, v in claims.items() if v is not None},
                           launch.get("key", self.key), algorithm="RS256", headers={"kid": KID})
        fields = "".join(f'<input type="hidden" name="{name}" value="{html.escape(value)}">'
                         for name, value in (("id_token", token), ("state", query["state"])))
        return 200, (f'<form id="launch" method="post" action="{html.escape(query["redirect_uri"])}">{fields}</form>'
                     '<script>document.getElementById("launch").submit()</script>')


def initiation(platform: Platform, login: str, roles: list[str], target: str, **how) -> dict[str, str]:
    """The LMS's login initiation for a launch of ``login`` (registered with the platform, with ``how`` it signs):
    the fields its page posts to the hub's /hub/lti13/oauth_login."""
    hint = f"hint-{login}-{len(platform.launches)}"
    platform.launches[hint] = {"login": login, "roles": roles, "target": target, **how}
    return {"iss": platform.url, "login_hint": hint, "target_link_uri": target, "client_id": CLIENT_ID,
            "lti_message_hint": f"message-{hint}", "lti_deployment_id": DEPLOYMENT}


def launch(hub, platform: Platform, login: str, roles: list[str], **how) -> tuple[requests.Session, requests.Response]:
    """One launch from the LMS, as the learner's browser carries it; returns her session and the hub's answer to the
    signed id_token (not followed)."""
    target = how.pop("target", f"{hub.url}/hub/")  # the address of the link in the LMS
    browser = requests.Session()
    start = browser.post(f"{hub.url}/hub/lti13/oauth_login", allow_redirects=False, timeout=30,
                         data=initiation(platform, login, roles, target, **how))
    assert start.status_code == 302 and start.headers["Location"].startswith(f"{platform.url}/authorize?"), (
        start.status_code, start.text[:500])
    form = browser.get(start.headers["Location"], timeout=30)
    assert form.status_code == 200, form.text
    action = html.unescape(re.search(r'action="([^"]+)"', form.text).group(1))
    fields = {name: html.unescape(value) for name, value in re.findall(r'name="(\w+)" value="([^"]*)"', form.text)}
    return browser, browser.post(action, data=fields, allow_redirects=False, timeout=60)


@pytest.fixture(scope="module")
def platform():
    platform = Platform()
    yield platform
    platform.server.shutdown()


@pytest.fixture(scope="module")
def hub(tmp_path_factory, platform):
    folder = tmp_path_factory.mktemp("lti-hub")
    folder.chmod(0o755)
    # What a course team sets in the hub's environment (deploy/jupyterhub_config.d/lti13.py reads it), then the
    # fragment itself, after the course's settings and the test machine's authenticator, as TLJH orders them.
    settings = {"LTI13_ISSUER": platform.url, "LTI13_CLIENT_ID": CLIENT_ID,
                "LTI13_AUTHORIZE_URL": f"{platform.url}/authorize", "LTI13_JWKS_ENDPOINT": f"{platform.url}/jwks",
                "LTI13_DEPLOYMENT_IDS": DEPLOYMENT}
    extra = f"import os\nos.environ.update({settings!r})\nload_subconfig({str(LTI_CONFIG)!r})  # noqa: F821\n"
    try:
        for running in start_hub(folder, extra_config=extra, accounts=(INSTRUCTOR,)):
            platform.redirect_uri = f"{running.url}/hub/lti13/oauth_callback"
            yield running
    except HubUnavailable as unavailable:
        require_hub(str(unavailable))


def test_the_lti_settings_are_off_until_the_lms_values_are_given(monkeypatch):
    for name in ("ISSUER", "CLIENT_ID", "AUTHORIZE_URL", "JWKS_ENDPOINT", "DEPLOYMENT_IDS"):
        monkeypatch.delenv(f"LTI13_{name}", raising=False)
    off = run_config(LTI_CONFIG)
    assert "authenticator_class" not in off.JupyterHub and "LTI13Authenticator" not in off
    assert off["__namespace__"]["COURSE"] == run_config(HUB_CONFIG)["__namespace__"]["COURSE"]
    monkeypatch.setenv("LTI13_ISSUER", "https://canvas.instructure.com")
    monkeypatch.setenv("LTI13_CLIENT_ID", "10000000000042, 10000000000043")
    monkeypatch.setenv("LTI13_AUTHORIZE_URL", "https://sso.canvaslms.com/api/lti/authorize_redirect")
    monkeypatch.setenv("LTI13_JWKS_ENDPOINT", "https://sso.canvaslms.com/api/lti/security/jwks")
    on = run_config(LTI_CONFIG)
    assert on.JupyterHub.authenticator_class == "ltiauthenticator.lti13.auth.LTI13Authenticator"
    assert on.LTI13Authenticator.client_id == {"10000000000042", "10000000000043"}
    assert on.LTI13Authenticator.username_key == "custom_login_id"
    from ltiauthenticator.lti13.auth import LTI13Authenticator  # every name set is one of the authenticator's traits
    assert set(on.LTI13Authenticator) <= set(LTI13Authenticator.class_trait_names(config=True))


def test_instructors_are_the_courses_not_the_institutions():
    is_instructor = run_config(LTI_CONFIG)["__namespace__"]["is_instructor"]
    assert is_instructor(INSTRUCTOR_ROLES) and is_instructor(["Instructor"])
    assert is_instructor([f"{ROLE}membership/Instructor#TeachingAssistant"])  # Canvas's TA
    assert not is_instructor(LEARNER_ROLES) and not is_instructor([]) and not is_instructor(None)
    assert not is_instructor([f"{ROLE}system/person#Administrator", f"{ROLE}membership#ContentDeveloper"])


def user(hub, name: str) -> dict | None:
    try:
        return hub.api("GET", f"users/{name}")
    except Exception as error:  # urllib.error.HTTPError 404: no such hub user
        if getattr(error, "code", None) == 404:
            return None
        raise


def lands_in_jupyterlab(hub, browser: requests.Session, name: str, answer: requests.Response) -> dict:
    """Follow the hub's redirect after the launch as the browser would, wait for her server, open JupyterLab;
    return its page config."""
    assert answer.status_code == 302, (answer.status_code, answer.text[:1000], hub.log()[-3000:])
    browser.get(urllib.parse.urljoin(hub.url, answer.headers["Location"]), timeout=120)  # the hub starts her server
    deadline = time.monotonic() + 120
    while not (user(hub, name) or {}).get("servers", {}).get("", {}).get("ready"):
        assert time.monotonic() < deadline, f"{name}'s server did not start:\n{hub.log()[-3000:]}"
        time.sleep(0.5)
    lab = browser.get(f"{hub.url}/user/{name}/lab", timeout=120)
    assert lab.status_code == 200 and lab.url.startswith(f"{hub.url}/user/{name}/lab"), (lab.status_code, lab.url)
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', lab.text, re.S)
    assert found, lab.text[:1000]
    return json.loads(found.group(1))


@pytest.fixture(scope="module")
def landed(hub, platform):
    """The learner's and the instructor's launches, both servers starting at once."""
    answers = {name: launch(hub, platform, name.upper() if name == LEARNER else name, roles)
               for name, roles in ((LEARNER, LEARNER_ROLES), (INSTRUCTOR, INSTRUCTOR_ROLES))}
    pages = {name: lands_in_jupyterlab(hub, browser, name, answer) for name, (browser, answer) in answers.items()}
    return {name: (answers[name][0], pages[name]) for name in answers}


def test_a_learner_lands_in_jupyterlab_as_herself_without_the_instructor_tools(hub, landed):
    browser, page = landed[LEARNER]
    assert page["hubUser"] == LEARNER  # the login id the LMS sent, LEARNER01, lower-cased as JupyterHub does
    assert set(user(hub, LEARNER)["groups"]) == {f"nbgrader-{COURSE}"}
    instructor_plugins, _ = post_build_disables("instructor")
    assert instructor_plugins <= set(page["disabledExtensions"]), page["disabledExtensions"]
    assert "@jupyter/nbgrader:assignment-list" not in page["disabledExtensions"]  # the hub's settings: Assignments
    assert browser.get(f"{hub.url}/user/{LEARNER}/formgrader", timeout=60, allow_redirects=False).status_code == 404


def test_an_instructor_lands_as_a_grader_with_the_tools(hub, landed):
    browser, page = landed[INSTRUCTOR]
    assert page["hubUser"] == INSTRUCTOR
    assert f"formgrade-{COURSE}" in user(hub, INSTRUCTOR)["groups"]
    assert not set(page["disabledExtensions"]) & {"@jupyter/nbgrader:formgrader",
                                                   "@jupyter/nbgrader:create-assignment"}, page["disabledExtensions"]
    formgrader = browser.get(f"{hub.url}/user/{INSTRUCTOR}/formgrader", timeout=60, allow_redirects=False)
    assert formgrader.status_code == 302 and "/formgrader/manage_assignments" in formgrader.headers["Location"], (
        [(r.status_code, r.url) for r in formgrader.history], formgrader.status_code, formgrader.text[:1000])
    assert f"formgrade-{COURSE}" in user(hub, GRADER)["groups"], "the shared grader account stays in the group"


def test_a_link_to_a_page_of_the_hub_opens_that_page(hub, platform, landed):
    """The LMS link's address is where the browser goes after the sign-in (an nbgitpuller link opens a lesson)."""
    page = "/hub/user-redirect/git-pull?repo=https%3A%2F%2Fgithub.com%2Fyour-org%2Fautograd-course&urlpath=lab"
    _, answer = launch(hub, platform, LEARNER, LEARNER_ROLES, target=f"{hub.url}{page}")
    assert (answer.status_code, answer.headers.get("Location")) == (302, page), answer.text[:500]


@pytest.mark.parametrize("what, how, status", [
    ("signed with a key that is not the LMS's", {"key": "other"}, 400),
    ("expired", {"shift": -700}, 400),
    ("without the login id", {"claims": {f"{CLAIM}custom": {}}}, 403),
    ("with the login id variable left unreplaced", {"claims": {f"{CLAIM}custom": {"login_id": "$Canvas.user.loginId"}}},
     403),
    ("from another deployment of the tool", {"claims": {f"{CLAIM}deployment_id": "7:another-course"}}, 403),
])
def test_a_launch_that_cannot_be_trusted_is_refused(hub, platform, what, how, status):
    if how.get("key") == "other":
        how = {**how, "key": platform.other_key}
    _, answer = launch(hub, platform, STRANGER, INSTRUCTOR_ROLES, **how)
    assert answer.status_code == status, (what, answer.status_code, answer.text[:500])
    assert not answer.cookies.get("jupyterhub-hub-login"), what
    assert [u["name"] for u in hub.api("GET", "users") if u["name"] not in (LEARNER, INSTRUCTOR, GRADER)] == [], what


def test_each_launch_opens_jupyterlab_in_chromium_with_her_own_tools(hub, platform, landed):
    """The whole launch in Chromium, as from Canvas or Moodle: a page of the LMS posts the login initiation, the
    hub's redirect, the LMS's self-posting form with the signed token, the hub's sign-in and spawn, JupyterLab. The
    learner's Nbgrader menu has the Assignment List and no Formgrader, the instructor's the Formgrader.
    Screenshots: artifacts/browser/lti-*.png."""
    from test_browser import launched_chromium, screenshot
    from test_hub import nbgrader_menu

    with launched_chromium() as browser:
        for name, roles in ((LEARNER, LEARNER_ROLES), (INSTRUCTOR, INSTRUCTOR_ROLES)):
            inputs = "".join(f'<input type="hidden" name="{k}" value="{html.escape(v)}">'
                             for k, v in initiation(platform, name, roles, f"{hub.url}/hub/").items())
            window = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            window.set_content(f'<form id="lms" method="post" action="{hub.url}/hub/lti13/oauth_login">{inputs}'
                               '<button>Autograd course on the hub</button></form>')
            window.click("text=Autograd course on the hub")  # the link in the LMS
            window.wait_for_url(f"{hub.url}/user/{name}/lab**", timeout=120_000)
            window.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").wait_for(timeout=120_000)
            menu = nbgrader_menu(window)
            screenshot(window, f"lti-{name}-landed")
            if name == LEARNER:
                assert "Assignment List" in menu and "Formgrader" not in menu, menu
            else:
                assert "Formgrader" in menu, menu
            window.context.close()
