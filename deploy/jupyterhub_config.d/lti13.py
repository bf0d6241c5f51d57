"""Launch the hub from the LMS (LTI 1.3: Canvas, Moodle): learners and instructors click a link in their course and
land in JupyterLab, signed in, without a password of the hub's own.

Off until the course team gives the four values the LMS shows when the tool is registered (docs/deployment.md,
"Launching from Canvas or Moodle (LTI 1.3)", says where each one is): write each as the default below (the second
argument of its os.environ.get), or set the LTI13_* variables in the hub's environment (Z2JH: hub.extraEnv; TLJH:
`systemctl edit jupyterhub`, Environment=...). With them set, every sign-in goes through the LMS: the hub's own
login page no longer signs anyone in (a hub admin reaches the shared grader account from the admin page).

TLJH: deploy/tljh/install.sh installs jupyterhub-ltiauthenticator into the hub's environment and copies this file to
/opt/tljh/config/jupyterhub_config.d/ once (an edited copy is kept). Zero to JupyterHub: the chart's hub image has
the authenticator; add this file's text as hub.extraConfig.lti13 next to autograd-course. tests/test_lti.py launches
a real hub with it, as an LMS would.

Who is who (the decisions, written down):

* The hub user name is the person's LMS login id, sent by the LMS as the custom field ``login_id``
  (Canvas: ``login_id=$Canvas.user.loginId``; Moodle: ``login_id=$User.username``), lower-cased by JupyterHub. It is
  what the course's roster calls the student (grading/roster.csv, ``id``: the nbgrader id and the hub user name;
  Canvas's export column "SIS Login ID" holds the same login, docs/instructors.md), what the learner types to sign in
  to the LMS, and it stays the same from one course and one term to the next. Not ``sub``: an opaque number or UUID
  per LMS that no roster or export shows. Not the email address: it changes (name changes, aliases) and Moodle's
  worksheet matches it separately. A launch without a usable ``login_id`` (missing, empty, or the variable left
  unreplaced, as Canvas does when the key's privacy level hides it) is refused: falling back to ``sub``, as the
  authenticator would, makes an account that no roster row names.
* An instructor is a launch whose LTI roles name the Instructor role of the course (context) the link is in:
  ``http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor``, one of its sub-roles
  (``.../membership/Instructor#TeachingAssistant``, which is how Canvas sends a TA), or the short form
  ``Instructor``. The institution role ``.../institution/person#Instructor`` does not count: Canvas sends it with
  every launch of anyone who teaches some course, also when that person is a student in this one. Instructors join
  ``formgrade-<COURSE>``, the group that gets the graders' tools (autograd-course.py's pre_spawn_hook) and the
  grader role; everyone else joins ``nbgrader-<COURSE>``, the group whose assignment list shows the course (what
  ``nbgrader db student add`` would do). A later launch adds, never removes: take someone out of
  ``formgrade-<COURSE>`` on the hub's admin page.
* With DEPLOYMENT_IDS set, only launches from those deployments of the tool (the LMS's placements of it) sign in.
"""

import os

COURSE = "autograd-course"  # the same course id as in autograd-course.py
#: The LMS's issuer: Canvas cloud "https://canvas.instructure.com"; Moodle its "Platform ID" (the site's address).
ISSUER = os.environ.get("LTI13_ISSUER", "")
#: The tool's client id(s) in the LMS (Canvas: the developer key's number; Moodle: "Client ID"), comma-separated.
CLIENT_ID = os.environ.get("LTI13_CLIENT_ID", "")
#: Where the hub sends the browser to be signed in (Canvas cloud:
#: "https://sso.canvaslms.com/api/lti/authorize_redirect"; Moodle: "Authentication request URL", .../mod/lti/auth.php).
AUTHORIZE_URL = os.environ.get("LTI13_AUTHORIZE_URL", "")
#: The LMS's public keys, which the hub checks every launch's signature with (Canvas cloud:
#: "https://sso.canvaslms.com/api/lti/security/jwks"; Moodle: "Public keyset URL", .../mod/lti/certs.php).
JWKS_ENDPOINT = os.environ.get("LTI13_JWKS_ENDPOINT", "")
#: Optional: the deployment ids (comma-separated) whose launches are accepted; empty accepts every deployment.
DEPLOYMENT_IDS = os.environ.get("LTI13_DEPLOYMENT_IDS", "")
#: The custom field that carries the login id (the authenticator's "custom_" prefix reads it from the custom claim).
LOGIN_FIELD = "login_id"

CUSTOM_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/custom"
ROLES_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/roles"
DEPLOYMENT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"


def split(value: str) -> list[str]:
    return [part.strip() for part in value.replace(" ", ",").split(",") if part.strip()]


def is_instructor(roles) -> bool:
    """Whether the LTI roles claim makes the launch an instructor's of this course (context roles only)."""
    return any(role == INSTRUCTOR or role.startswith(INSTRUCTOR.replace("#", "/") + "#") or role == "Instructor"
               for role in roles or [])


def login_id(claims: dict) -> str:
    """The login id the LMS sent, or "" when there is none to trust (absent, empty, an unreplaced $Variable)."""
    value = str((claims.get(CUSTOM_CLAIM) or {}).get(LOGIN_FIELD) or "").strip()
    return "" if value.startswith("$") else value


async def course_groups_from_lms_roles(authenticator, handler, auth_model):
    """Authenticator.post_auth_hook: refuse a launch that names no login id or comes from another deployment; put
    instructors into formgrade-<COURSE>, everyone else into nbgrader-<COURSE>. (``manage_groups`` cannot do this:
    JupyterHub refuses it next to autograd-course.py's ``load_groups``, and it would drop the shared grader account
    from its group.)"""
    from jupyterhub import orm
    from jupyterhub.utils import maybe_future

    claims = auth_model.get("auth_state") or {}
    if not login_id(claims):
        authenticator.log.warning("LTI launch without the custom field %s (sub %r): refused; add "
                                  "%s=$Canvas.user.loginId (Canvas) or %s=$User.username (Moodle) to the tool",
                                  LOGIN_FIELD, claims.get("sub"), LOGIN_FIELD, LOGIN_FIELD)
        return None
    deployments = split(DEPLOYMENT_IDS)
    if deployments and claims.get(DEPLOYMENT_CLAIM) not in deployments:
        authenticator.log.warning("LTI launch from deployment %r, not one of %s: refused",
                                  claims.get(DEPLOYMENT_CLAIM), deployments)
        return None
    name = auth_model["name"]
    wanted = f"formgrade-{COURSE}" if is_instructor(claims.get(ROLES_CLAIM)) else f"nbgrader-{COURSE}"
    user = handler.find_user(name)
    if user is None:  # what the hub does right after this hook, done first so that the group can be joined now
        user = handler.user_from_username(name)
        await maybe_future(authenticator.add_user(user))
    group = orm.Group.find(handler.db, wanted)
    if group is None:
        group = orm.Group(name=wanted)
        handler.db.add(group)
    if group not in user.orm_user.groups:
        authenticator.log.info("LTI launch: %s joins %s", name, wanted)
        user.orm_user.groups.append(group)
    handler.db.commit()
    return auth_model


c = get_config()  # noqa: F821 - provided by traitlets when JupyterHub loads this file

if ISSUER and CLIENT_ID and AUTHORIZE_URL and JWKS_ENDPOINT:
    c.JupyterHub.authenticator_class = "ltiauthenticator.lti13.auth.LTI13Authenticator"
    c.LTI13Authenticator.issuer = ISSUER
    c.LTI13Authenticator.client_id = set(split(CLIENT_ID))
    c.LTI13Authenticator.authorize_url = AUTHORIZE_URL
    c.LTI13Authenticator.jwks_endpoint = JWKS_ENDPOINT
    c.LTI13Authenticator.username_key = f"custom_{LOGIN_FIELD}"
    # Who may sign in is the LMS's to say: a launch signed by its key for this client id. (TLJH's users.allowed,
    # if any, would otherwise turn every learner away.)
    c.LTI13Authenticator.allow_all = True
    c.LTI13Authenticator.post_auth_hook = course_groups_from_lms_roles
