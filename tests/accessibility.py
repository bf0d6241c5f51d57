"""axe-core (4.12, bundled by axe-playwright-python) on a page in Chromium: the WCAG 2.1 A and AA rules, and what a
test counts: critical and serious violations (tests/test_accessibility.py, tests/test_browser.py). On a live notebook
panel JupyterLab's own elements are told apart from the course's content (:data:`JUPYTERLAB_OWN`): those are recorded,
not counted. Chromium's own accessibility tree (what a screen reader is given) is read through the DevTools protocol
(:func:`ax_nodes`, :func:`ax_outline`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

#: The rules axe runs: WCAG 2.0 and 2.1, levels A and AA.
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
COUNTED = ("critical", "serious")
#: nbconvert's text alternative for an image nobody described.
PLACEHOLDER_ALT = "No description has been provided for this image"


def violations(page, context=None) -> list[dict]:
    """axe's violations on ``page`` (within ``context``, a CSS selector, when given)."""
    from axe_playwright_python.sync_playwright import Axe

    options = {"runOnly": {"type": "tag", "values": TAGS}, "resultTypes": ["violations"]}
    return Axe().run(page, context=context, options=options).response["violations"]


def counted(found: list[dict]) -> list[str]:
    """The critical and serious ones, a line each: rule, impact, elements, and the first element's selector."""
    return [f"{v['id']} ({v['impact']}, {len(v['nodes'])} elements, e.g. {v['nodes'][0]['target']}): {v['help']}"
            for v in found if v["impact"] in COUNTED]


def record(name: str, found: list[dict], folder: Path) -> None:
    """Every violation of a page, for the artifacts (what the suite counts and what it reports separately)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(
        [{"id": v["id"], "impact": v["impact"], "help": v["help"], "elements": len(v["nodes"]),
          "targets": [n["target"] for n in v["nodes"][:5]]} for v in found], indent=1))


def undescribed_images(page, within: str = "") -> list[str]:
    """The images of a page (inside the elements ``within`` selects, when given) without a real text alternative
    (missing, empty or nbconvert's placeholder)."""
    return page.eval_on_selector_all(f"{within} img".strip(), f"""imgs => imgs
        .filter(i => !i.getAttribute('alt') || !i.getAttribute('alt').trim()
                     || i.getAttribute('alt').includes({json.dumps(PLACEHOLDER_ALT)}))
        .map(i => (i.getAttribute('src') || '').slice(0, 40))""")


#: JupyterLab's own elements inside a live notebook panel that fail axe's rules (JupyterLab 4.6, not the course's
#: content): (rule, the class of the element, what and where it is reported upstream). Checked at the element axe names
#: (the last compound of its selector), so that the same rule on the course's content still counts.
JUPYTERLAB_OWN = (
    ("aria-input-field-name", "cm-content", "a code cell's editor (CodeMirror's role=textbox) has no accessible "
     "name: jupyterlab/jupyterlab#10347, #16890"),
    ("aria-required-children", "jp-WindowedPanel-viewport", "the list of cells has role=feed, but its children "
     "are not articles: jupyterlab/jupyterlab#13704, #14765"),
    ("button-name", "jp-collapseHeadingButton", "a Markdown heading's collapse button has no name: "
     "jupyterlab/jupyterlab#16890"),
)


def _jupyterlabs(rule: str, node: dict) -> bool:
    last = str(node["target"][-1]).split(">")[-1]
    return any(rule == own and re.search(rf"\.{re.escape(cls)}(?![\w-])", last) for own, cls, _ in JUPYTERLAB_OWN)


def split_jupyterlab(found: list[dict]) -> tuple[list[dict], list[dict]]:
    """axe's violations on a live notebook panel as (the course's, JupyterLab's own), split element by element."""
    ours, theirs = [], []
    for violation in found:
        mine = [n for n in violation["nodes"] if not _jupyterlabs(violation["id"], n)]
        lab = [n for n in violation["nodes"] if _jupyterlabs(violation["id"], n)]
        ours += [{**violation, "nodes": mine}] if mine else []
        theirs += [{**violation, "nodes": lab}] if lab else []
    return ours, theirs


def tally(found: list[dict]) -> dict[str, str]:
    """Critical and serious violations as "rules / elements", the way issue 37's table counts them."""
    return {impact: f"{sum(1 for v in found if v['impact'] == impact)} / "
                    f"{sum(len(v['nodes']) for v in found if v['impact'] == impact)}" for impact in COUNTED}


def _cdp(page):
    return page.context.new_cdp_session(page)


def _backend_ids(client, selector: str) -> list[int]:
    root = client.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    nodes = client.send("DOM.querySelectorAll", {"nodeId": root, "selector": selector})["nodeIds"]
    return [client.send("DOM.describeNode", {"nodeId": node})["node"]["backendNodeId"] for node in nodes]


def _plain(node: dict) -> dict:
    props = {p["name"]: p["value"].get("value") for p in node.get("properties", [])}
    return {"role": node.get("role", {}).get("value"), "name": node.get("name", {}).get("value", ""),
            "value": node.get("value", {}).get("value"),
            "description": node.get("description", {}).get("value", ""), **props}


def ax_nodes(page, within: str, roles: tuple[str, ...]) -> list[dict]:
    """Chromium's accessibility nodes of the given roles inside (or at) every element the CSS selector ``within``
    selects: role, name, value and properties (focusable, live, atomic, valuetext...), as a screen reader gets them."""
    client = _cdp(page)
    try:
        return [_plain(n) for backend in _backend_ids(client, within) for role in roles
                for n in client.send("Accessibility.queryAXTree", {"backendNodeId": backend, "role": role})["nodes"]]
    finally:
        client.detach()


def ax_outline(page, selector: str, limit: int = 4000) -> str:
    """The accessibility subtree of the first element the CSS selector ``selector`` selects, one line per node that
    a screen reader sees (role, "name", value and the properties that matter), indented by depth: what it reads."""
    client = _cdp(page)
    try:
        backends = _backend_ids(client, selector)
        if not backends:
            raise LookupError(f"nothing on the page matches {selector!r}")
        backend = backends[0]
        nodes = client.send("Accessibility.getFullAXTree")["nodes"]
    finally:
        client.detach()
    by_id = {n["nodeId"]: n for n in nodes}
    start = next(n for n in nodes if n.get("backendDOMNodeId") == backend)
    keep = ("description", "live", "atomic", "focusable", "valuetext", "checked", "pressed", "disabled", "expanded")
    lines: list[str] = []

    def walk(node: dict, depth: int) -> None:
        hidden = ("generic", "none", "LineBreak", "InlineTextBox")
        shown = not node.get("ignored") and _plain(node)["role"] not in hidden
        if shown:
            plain = _plain(node)
            extra = ", ".join(f"{k}={plain[k]}" for k in keep if plain.get(k) not in (None, False, ""))
            value = f" = {plain['value']!r}" if plain["value"] not in (None, "") else ""
            lines.append(f"{'  ' * depth}{plain['role']} {plain['name']!r}{value}" + (f" [{extra}]" if extra else ""))
        for child in node.get("childIds", []):
            if child in by_id:
                walk(by_id[child], depth + (1 if shown else 0))

    walk(start, 0)
    text = "\n".join(lines)
    return text if len(text) <= limit else text[:limit] + "\n..."
