"""Docs and docstrings that tell the truth about where things are: every module, function or class they name resolves,
and the package map in docs/maintainers.md matches the tree.

Read from the text: a dotted name (``autograder.grading.isolation.pristine``, ``autograder.lms.export.CanvasExport``)
is imported, a path (``autograder/data/``) must exist, and a Sphinx role in a docstring (``:func:`.cases.case_stream```,
``:class:`GradingFailure```) must name something its module can reach. A comment that records where code used to be
fails here.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from autograder import course

ROOT = course.ROOT
PACKAGE = ROOT / "autograder"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "deploy" / "README.md"]
SOURCES = sorted(p for folder in ("autograder", "tools", "mutation") for p in (ROOT / folder).rglob("*.py"))
DOTTED = re.compile(r"(?<![\w./-])autograder(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./-])autograder/[\w/.-]*\w/?")
ROLE = re.compile(r":(?:mod|func|class|data|meth|attr|exc|obj):`~?([^`]+)`")


def resolve(dotted: str, context: dict | None = None):
    """The object ``dotted`` names: a module imported, then attributes; ``context`` (a module's globals) for a name
    that starts inside a module. Raises LookupError when nothing by that name exists."""
    parts = dotted.split(".")
    if context is not None and parts[0] in context:
        value = context[parts[0]]
        rest = parts[1:]
    else:
        for cut in range(len(parts), 0, -1):
            try:
                value = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            rest = parts[cut:]
            break
        else:
            raise LookupError(dotted)
    for part in rest:
        if not hasattr(value, part):
            try:  # a submodule not imported by its package
                value = importlib.import_module(f"{value.__name__}.{part}")
                continue
            except (ModuleNotFoundError, AttributeError):
                raise LookupError(dotted) from None
        value = getattr(value, part)
    return value


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def docstrings(tree: ast.AST, owner: str | None = None):
    """(docstring, the class it is written in or None) for the module, every class and every function."""
    for node in ast.iter_child_nodes(tree) if not isinstance(tree, ast.Module) else [tree, *tree.body]:
        if node is tree or isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if node is not tree or isinstance(tree, ast.Module):
                yield ast.get_docstring(node, clean=False) or "", node.name if isinstance(node, ast.ClassDef) else owner
            if node is not tree:
                yield from docstrings(node, node.name if isinstance(node, ast.ClassDef) else owner)


def comments(text: str) -> str:
    return "\n".join(line.split("#", 1)[1] for line in text.splitlines() if "#" in line)


def unresolved_names(text: str) -> list[str]:
    wrong = []
    for name in sorted(set(DOTTED.findall(text))):
        if "NN" in name:  # a placeholder: exNN_slug
            continue
        try:
            resolve(name.rstrip("."))
        except LookupError:
            wrong.append(name)
    for path in sorted(set(PATH.findall(text))):
        if not (ROOT / path).exists():
            wrong.append(path)
    return wrong


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_and_path_a_doc_names_exists(path):
    assert not unresolved_names(path.read_text()), f"{path.name} names what does not exist"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_name_a_docstring_or_comment_gives_resolves(path):
    text = path.read_text()
    found = list(docstrings(ast.parse(text)))
    wrong = unresolved_names("\n".join(doc for doc, _ in found) + "\n" + comments(text))
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    # the module's own names (a __main__ module is not imported: it would run)
    context = {} if path.name == "__main__.py" else vars(importlib.import_module(name))
    for doc, owner in found:
        scope = {**context, **vars(context[owner])} if owner in context else context
        for target in sorted(set(ROLE.findall(doc))):
            target = target.strip().removesuffix("()")
            try:
                if target.startswith("."):
                    level = len(target) - len(target.lstrip("."))
                    base = package.rsplit(".", level - 1)[0] if level > 1 else package
                    resolve(base + "." + target.lstrip("."))
                else:
                    resolve(target, scope)
            except LookupError:
                wrong.append(target)
    assert not wrong, f"{path.relative_to(ROOT)}: the docstrings or comments name what does not exist: {wrong}"


def _map_block() -> str:
    text = (ROOT / "docs" / "maintainers.md").read_text()
    start = text.index("autograder/    the importable package")
    return text[start:text.index("\ntools/", start)]


def test_the_package_map_in_the_maintainers_doc_matches_the_tree():
    block = _map_block()
    named = set(re.findall(r"\b([\w]+(?:\.py|/))", block.split("\n", 1)[1]))
    children = {p.name + ("/" if p.is_dir() else "") for p in PACKAGE.iterdir()
                if p.name not in ("__pycache__", "__init__.py", "__main__.py")}
    checks = {p.name + ("/" if p.is_dir() else "") for p in (PACKAGE / "checks").iterdir()
              if p.name not in ("__pycache__", "__init__.py") and not re.match(r"ex\d\d_", p.name)}
    packages = {p.name + "/" for p in (PACKAGE / "checks").iterdir() if p.is_dir() and re.match(r"ex\d\d_", p.name)}
    listed = children | checks | packages
    assert listed <= named, f"the map leaves out {sorted(listed - named)}"
    placeholders = {"exNN_slug.py"}
    existing = {p.name + ("/" if p.is_dir() else "") for p in PACKAGE.rglob("*")}
    missing = named - placeholders - existing
    assert not missing, f"the map names what is not there: {sorted(missing)}"
