"""axe-core (4.12, bundled by axe-playwright-python) on a page in Chromium: the WCAG 2.1 A and AA rules, and what a
test counts: critical and serious violations (tests/test_accessibility.py, tests/test_browser.py)."""

from __future__ import annotations

import json
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


def undescribed_images(page) -> list[str]:
    """The images of a page without a real text alternative (missing, empty or nbconvert's placeholder)."""
    return page.eval_on_selector_all("img", f"""imgs => imgs
        .filter(i => !i.getAttribute('alt') || !i.getAttribute('alt').trim()
                     || i.getAttribute('alt').includes({json.dumps(PLACEHOLDER_ALT)}))
        .map(i => (i.getAttribute('src') || '').slice(0, 40))""")
