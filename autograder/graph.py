"""Draw the computation graph that autograd recorded behind a tensor, with no system binary.

The graph is read from ``t.grad_fn`` and, recursively, each node's ``next_functions``. Nodes are autograd's
backward functions (``MulBackward0``, ...); a leaf shows up as its ``AccumulateGrad`` node, labelled with the
leaf's name when one is given and with its shape. Edges point the way data flowed in the forward pass
(input -> consumer); backward walks them the other way. An input used twice gives two edges. In a picture, leaves
are rounded boxes and operations square ones (told apart by shape, not only by colour), the root has the thickest
border, and :func:`alt_text` says the same in words: the picture's text alternative.

``names`` may be ``{tensor: "x"}``, ``{"x": tensor}``, pairs such as ``model.named_parameters()``, or a plain
list of tensors (named ``[0]``, ``[1]``, ...)::

    show_graph(loss, names={w: "w", b: "b"})   # Mermaid in JupyterLab, an indented tree as plain text
    draw_graph(loss, names=model.named_parameters())   # a matplotlib picture, laid out by depth
    show_drawing(loss, names={w: "w"}, caption="...")  # the picture with its text alternative and a caption
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Graph:
    """Nodes are numbered in reverse topological order: node 0 is the root, every consumer before its inputs."""

    labels: list[str]  # one line per fact, e.g. "w\n(3, 2)"
    is_leaf: list[bool]  # True for AccumulateGrad (a leaf tensor)
    edges: list[tuple[int, int]]  # (input, consumer); repeated when an input is used twice
    depth: list[int]  # longest path from the root; the root has depth 0


def _name_table(names) -> dict[int, str]:
    """id(tensor) -> name, from any of the accepted forms of ``names``."""
    items = [] if names is None else names.items() if isinstance(names, dict) else names
    table = {}
    for i, item in enumerate(items):
        pair = (item, f"[{i}]") if isinstance(item, torch.Tensor) else tuple(item)
        tensor, name = pair if isinstance(pair[0], torch.Tensor) else pair[::-1]
        table[id(tensor)] = str(name)
    return table


def _inputs(fn) -> list:
    return [child for child, _ in fn.next_functions if child is not None]


def _label(fn, table: dict[int, str]) -> str:
    leaf = getattr(fn, "variable", None)
    if leaf is not None:
        return f"{table.get(id(leaf), 'leaf')}\n{tuple(leaf.shape)}"
    try:  # the shape of the tensor this node produced: a private attribute, so tolerate its absence
        return f"{fn.name()}\n{tuple(fn._input_metadata[0].shape)}"
    except (AttributeError, IndexError, TypeError):
        return fn.name()


def topological(root, inputs_of) -> list:
    """Every node reachable from ``root`` through ``inputs_of(node)``, each once, root first and every consumer
    before its inputs (a depth-first post-order, reversed; no recursion, so deep graphs are fine)."""
    seen, order, stack = {root}, [], [(root, iter(inputs_of(root)))]
    while stack:
        for child in stack[-1][1]:  # resumes where this node's inputs were left
            if child not in seen:
                seen.add(child)
                stack.append((child, iter(inputs_of(child))))
                break
        else:  # every input is placed: so is the node
            order.append(stack.pop()[0])
    order.reverse()
    return order


def graph_of(order: list, inputs_of, label_of, is_leaf_of) -> Graph:
    """The :class:`Graph` of nodes listed as :func:`topological` lists them (any kind of node: autograd's, or a
    scalar engine's), with one edge per use of an input and depths for the drawing."""
    index = {node: i for i, node in enumerate(order)}
    edges = [(index[child], index[node]) for node in order for child in inputs_of(node)]
    depth = [0] * len(order)
    for src, dst in sorted(edges, key=lambda e: e[1]):  # consumers are settled before their inputs
        depth[src] = max(depth[src], depth[dst] + 1)
    return Graph([label_of(node) for node in order], [bool(is_leaf_of(node)) for node in order], edges, depth)


def build_graph(t: torch.Tensor, names=None) -> Graph:
    """The graph behind ``t``: every node reachable from ``t.grad_fn``, each once, with edges and depths."""
    table = _name_table(names)
    if t.grad_fn is None:
        if not t.requires_grad:
            raise ValueError("this tensor has no history: it does not require grad (detached or a constant)")
        return Graph([f"{table.get(id(t), 'leaf')}\n{tuple(t.shape)}"], [True], [], [0])
    return graph_of(topological(t.grad_fn, _inputs), _inputs, lambda fn: _label(fn, table),
                    lambda fn: getattr(fn, "variable", None) is not None)


def to_text(t: torch.Tensor, names=None) -> str:
    """An indented tree from the root down to the leaves; a node reached a second time is not expanded again."""
    g = build_graph(t, names)
    inputs: dict[int, list[int]] = {i: [] for i in range(len(g.labels))}
    for src, dst in g.edges:
        inputs[dst].append(src)
    lines, shown, stack = [], set(), [(0, "")]
    while stack:  # pre-order with an explicit stack, so a 10,000-step chain is fine
        i, indent = stack.pop()
        repeat = "   (shared: shown above)" if i in shown and inputs[i] else ""
        lines.append(indent + g.labels[i].replace("\n", " ") + repeat)
        if i not in shown:
            shown.add(i)
            stack.extend((src, indent + "    ") for src in reversed(inputs[i]))
    return "\n".join(lines)


def reading_order(g: Graph) -> list[int]:
    """The nodes in the order the drawing reads, from the deepest leaves to the root (by depth, then index)."""
    return sorted(range(len(g.labels)), key=lambda i: (-g.depth[i], -i))


def node_names(g: Graph) -> list[str]:
    """One name per node for text: the label's first line, numbered #1, #2... in :func:`reading_order` where several
    nodes share it."""
    first = [label.split("\n")[0] for label in g.labels]
    total = {name: first.count(name) for name in first}
    seen: dict[str, int] = {}
    names = [""] * len(first)
    for i in reading_order(g):
        seen[first[i]] = seen.get(first[i], 0) + 1
        names[i] = f"{first[i]} #{seen[first[i]]}" if total[first[i]] > 1 else first[i]
    return names


def _number(details: list[str]) -> bool:
    try:
        float(details[0])
        return True
    except (IndexError, ValueError):
        return False


def alt_text(graph, names=None, states: list[str] | None = None, layout: str = "left to right") -> str:
    """The text alternative of a drawn graph (``graph``: a :class:`Graph`, or a tensor with its ``names``): how many
    boxes and arrows, every leaf and operation with its shape, which one is the root, and every arrow, in words, from
    the leaves to the root. ``states``, one short phrase per node, adds what each node is doing (the backward
    stepper's frames); ``layout`` says how the picture is laid out ("left to right" or "top to bottom")."""
    g = graph if isinstance(graph, Graph) else build_graph(graph, names)
    called, order = node_names(g), reading_order(g)

    def node(i: int) -> str:
        details = [line for line in g.labels[i].split("\n")[1:] if line]
        kind = "shape " if details and details[0].startswith("(") else "value " if _number(details) else ""
        text = called[i] + (f", {kind}{', '.join(details)}" if details else "")
        text += " (the root)" if i == 0 else ""
        return text + (f": {states[i]}" if states else "")

    leaves = [node(i) for i in order if g.is_leaf[i]]
    operations = [node(i) for i in order if not g.is_leaf[i]]
    position = {i: k for k, i in enumerate(order)}
    arrows = [f"{called[src]} feeds {called[dst]}"
              for src, dst in sorted(g.edges, key=lambda edge: (position[edge[0]], position[edge[1]]))]
    where = ("leaves on the left, the root on the right" if layout == "left to right"
             else "the root at the top, the leaves below it")
    text = (f"Computation graph drawn {layout}, {where}: {len(g.labels)} boxes and {len(g.edges)} "
            f"arrow{'s' if len(g.edges) != 1 else ''}. ")
    if leaves:
        text += f"Leaves (rounded boxes): {'; '.join(leaves)}. "
    if operations:
        text += f"Operations (square boxes): {'; '.join(operations)}. "
    if arrows:
        text += f"Arrows, the way data flowed forward (backward walks them back): {'; '.join(arrows)}."
    return text.strip()


def to_mermaid(t: torch.Tensor, names=None) -> str:
    """Mermaid flowchart text (left to right: leaves first, the root last), with its accessible title and description
    (``accTitle``, ``accDescr``: JupyterLab makes them the picture's ``alt`` and a caption for screen readers)."""
    g = build_graph(t, names)
    described = alt_text(g).replace("#", "number ")  # Mermaid reads "#2;" as a character entity
    lines = ["flowchart LR", f"    accTitle: The computation graph autograd recorded, {len(g.labels)} boxes",
             f"    accDescr: {described}"]
    for i, label in enumerate(g.labels):
        text = label.replace('"', "#quot;").replace("\n", "<br/>")
        shape = f'(["{text}"])' if g.is_leaf[i] else f'["{text}"]'
        lines.append(f"    n{i}{shape}:::{'leaf' if g.is_leaf[i] else 'op'}")
    lines += [f"    n{src} --> n{dst}" for src, dst in g.edges]
    lines += ["    classDef leaf fill:#dbeafe,stroke:#1d4ed8", "    classDef op fill:#ffedd5,stroke:#c2410c",
              "    style n0 stroke-width:3px"]
    return "\n".join(lines)


def show_graph(t: torch.Tensor, names=None) -> None:
    """Display the graph: JupyterLab 4.1+ draws the Mermaid, as a picture whose text alternative is the diagram's
    accessible title and description (:func:`to_mermaid`); a terminal shows the text tree. The Mermaid goes out as
    Markdown (a ``mermaid`` block) as well as on its own: JupyterLab prefers the Markdown and then keeps no copy of the
    drawing, which an HTML export would show as an image without a text alternative; the export keeps the Mermaid."""
    from IPython.display import display

    names = list(names.items()) if isinstance(names, dict) else None if names is None else list(names)  # reusable
    mermaid = to_mermaid(t, names)
    display({"text/markdown": f"```mermaid\n{mermaid}\n```", "text/vnd.mermaid": mermaid,
             "text/plain": to_text(t, names)}, raw=True)


def draw_graph(t: torch.Tensor, names=None, ax=None):
    """Draw the graph with matplotlib, one column per depth (leaves left, root right). Returns the axes."""
    return draw(build_graph(t, names), ax)


def show_drawing(t: torch.Tensor, names=None, *, caption: str, title: str | None = None) -> None:
    """Draw the graph behind ``t`` (:func:`draw_graph`) and show it with :func:`autograder.figures.show`: its text
    alternative is :func:`alt_text`, ``caption`` the visible caption (what to take from the picture)."""
    from . import figures

    names = list(names.items()) if isinstance(names, dict) else None if names is None else list(names)  # reusable
    ax = draw_graph(t, names)
    if title:
        ax.set_title(title, fontsize=10)
    figures.show(ax.figure, alt=alt_text(t, names), caption=caption)


def draw(g: Graph, ax=None, style=None):
    """Draw a :class:`Graph` (see :func:`draw_graph`). ``style``, when given, maps a node's index to keyword
    arguments for its box (e.g. ``{2: {"fc": "#fde047", "lw": 3}}``) to highlight it. Returns the axes."""
    import matplotlib.pyplot as plt

    columns, pos = max(g.depth) + 1, {}
    for d in range(columns):  # order each column by where its consumers sit, to limit crossings
        def pull(i):
            ys = [pos[dst][1] for src, dst in g.edges if src == i and dst in pos]
            return -sum(ys) / len(ys) if ys else 0.0
        members = sorted((i for i in range(len(g.labels)) if g.depth[i] == d), key=pull)
        pos.update({i: (columns - 1 - d, (len(members) - 1) / 2 - k) for k, i in enumerate(members)})
    tallest = max(g.depth.count(d) for d in range(columns))
    if ax is None:
        _, ax = plt.subplots(figsize=(min(1.9 * columns + 0.6, 12), max(1.5, 0.85 * tallest + 0.5)))
    inches_per_column = ax.get_position().width * ax.figure.get_figwidth() / columns
    fontsize = max(5.5, min(8.0, 5.5 * inches_per_column))  # shrink labels when the axes are crowded
    boxes = {}
    for i, (x, y) in pos.items():
        fill, edge = ("#dbeafe", "#1d4ed8") if g.is_leaf[i] else ("#ffedd5", "#c2410c")
        box = {"boxstyle": f"{'round' if g.is_leaf[i] else 'square'},pad=0.35", "fc": fill, "ec": edge,
               "lw": 2.2 if i == 0 else 1, **(style or {}).get(i, {})}
        boxes[i] = ax.text(x, y, g.labels[i], ha="center", va="center", fontsize=fontsize, zorder=2, bbox=box)
    repeats: dict[tuple[int, int], int] = {}
    for src, dst in g.edges:  # drawn after the boxes (zorder), so they can be clipped at the box outlines
        k = repeats[(src, dst)] = repeats.get((src, dst), -1) + 1
        span = pos[dst][0] - pos[src][0]
        bend = 0.3 * k + (0.9 / span if span > 1 else 0.0)  # long or repeated edges curve around boxes
        ax.annotate("", xy=pos[dst], xytext=pos[src], zorder=3,
                    arrowprops=dict(arrowstyle="-|>", color="0.3", shrinkA=2, shrinkB=2,
                                    patchA=boxes[src].get_bbox_patch(), patchB=boxes[dst].get_bbox_patch(),
                                    connectionstyle=f"arc3,rad={bend}"))
    ax.set_xlim(-0.6, columns - 0.4)
    ax.set_ylim(-tallest / 2, tallest / 2)
    ax.axis("off")
    return ax
