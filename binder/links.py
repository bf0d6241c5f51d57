"""Launch links for the course: Binder (README badge and lesson table) and nbgitpuller (deploy/README.md).

The course's public GitHub repository is named once, here, in ``REPOSITORY``. The repository has no public home
yet, so the value is a placeholder: when it is published, change ``REPOSITORY`` (and ``BRANCH`` if needed) and run

    python binder/links.py readme          # rewrite the Binder badge and the Binder column of README.md

``python binder/links.py nbgitpuller https://hub.example.edu`` prints the nbgitpuller link for a hub.
tests/test_binder.py fails while README.md is not what ``readme`` would write. Standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from urllib.parse import quote, urlencode

#: owner/name of the course on GitHub (placeholder until the repository is published).
REPOSITORY = "your-org/autograd-course"
#: The branch learners get.
BRANCH = "main"

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BADGE_IMAGE = "https://mybinder.org/badge_logo.svg"


def lessons(root: Path = ROOT) -> list[str]:
    """Repository paths of the lesson notebooks, in course order (the first is the badge's target)."""
    return [f"lessons/{p.name}" for p in sorted((root / "lessons").glob("[0-9][0-9]-*.ipynb"))]


def binder_url(path: str) -> str:
    """mybinder.org link that builds the repository and opens ``path`` in JupyterLab."""
    return f"https://mybinder.org/v2/gh/{REPOSITORY}/{BRANCH}?urlpath=lab/tree/{path}"


def nbgitpuller_url(hub: str, path: str = "") -> str:
    """A hub link that clones (first visit) or merges updates into ~/<repository name> and opens ``path`` in
    JupyterLab: lessons reach learners without rebuilding the image."""
    folder = REPOSITORY.split("/")[1]
    query = urlencode({"repo": f"https://github.com/{REPOSITORY}", "branch": BRANCH,
                       "urlpath": f"lab/tree/{folder}/{path}".rstrip("/")}, quote_via=quote)
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def badge() -> str:
    return f"[![Binder]({BADGE_IMAGE})]({binder_url(lessons()[0])})"


def render_readme(text: str) -> str:
    """README text with the Binder badge under the title and a Binder cell in every lesson row of the table."""
    lines = text.split("\n")
    # The badge: its own paragraph right under the title.
    for i, line in enumerate(lines):
        if line.startswith(f"[![Binder]({BADGE_IMAGE})]"):
            del lines[i:i + 2 if lines[i + 1:i + 2] == [""] else i + 1]
            break
    title = next(i for i, line in enumerate(lines) if line.startswith("# "))
    lines[title + 1:title + 1] = ["", badge()]
    # The table: a "Binder" column after "Lesson".
    out = []
    for line in lines:
        cells = line.split(" | ")
        if line.startswith("| # | Lesson | "):
            if cells[2] != "Binder":
                cells.insert(2, "Binder")
        elif line.startswith("|---|---|"):
            if line.count("|") == 4:  # not yet widened
                line = "|---" + line
            out.append(line)
            continue
        else:
            lesson = re.match(r"\| \d\d \| \[[^\]]*\]\((lessons/[^)]+\.ipynb)\)", line)
            if lesson:
                cell = f"[launch]({binder_url(lesson.group(1))})"
                if len(cells) > 2 and cells[2].startswith("[launch](https://mybinder.org/"):
                    cells[2] = cell
                else:
                    cells.insert(2, cell)
        out.append(" | ".join(cells))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    readme = commands.add_parser("readme", help="rewrite the Binder badge and column of README.md")
    readme.add_argument("--check", action="store_true", help="only report whether README.md is up to date")
    puller = commands.add_parser("nbgitpuller", help="print the nbgitpuller link for a hub")
    puller.add_argument("hub", help="the hub's address, e.g. https://hub.example.edu")
    puller.add_argument("path", nargs="?", default="lessons/01-chain-rule.ipynb", help="what to open")
    args = parser.parse_args(argv)
    if args.command == "nbgitpuller":
        print(nbgitpuller_url(args.hub, args.path))
        return 0
    current = README.read_text()
    wanted = render_readme(current)
    if args.check:
        print("README.md is up to date" if wanted == current else "README.md needs: python binder/links.py readme")
        return 0 if wanted == current else 1
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
