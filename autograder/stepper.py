"""The backward stepper: watch an engine run a backward pass one node at a time, in the order it really ran.

One cell does it::

    from autograder import stepper
    stepper.show(loss, names={x: "x", p: "p"})     # PyTorch's engine on your expression
    stepper.show_value(out, names={x: "x"})        # your exercise-02 Value engine on a Value graph

Each click of **step** advances the schedule by one node: the node that runs says "RUNS with" the gradient it runs
with (its *input buffer*) and has the thickest border; every node shows how many consumers it still waits for (its
dependency count), what has arrived in its buffer so far and, at a branch point, the contributions being summed; the
nodes whose count has reached zero say "ready": they wait in the *ready queue*. **back**, **start** and **run to
end** move freely. (The states are written in the boxes and coloured too: the colour is never the only sign.)

For everyone: the picture has a text alternative that lists every node with its state and every arrow
(:meth:`Schedule.alt`), and a visible caption; the status line is a live region (``role="status"``), so a screen
reader announces each step; the buttons are ordinary buttons (Tab, then Enter or Space). ipywidgets 8 has no way to
mark a widget as a live region, so the widget carries a hidden Output holding a few lines of JavaScript
(:data:`LIVE_REGION_JS`) that set ``role="status"`` and ``aria-live`` on the status line's element when JupyterLab
renders it (an Output widget's outputs are trusted, so JupyterLab runs it; elsewhere it does nothing).

Nothing is replayed from a model of the engine: :func:`record` runs one real backward pass with hooks on every node
of the graph (``Node.register_prehook`` sees the complete buffer a node runs with, ``Node.register_hook`` what it
sends along each edge), in the order the engine calls them, then puts every leaf's ``.grad`` back as it was (the
graph is kept: ``retain_graph=True``). The dependency counts are counted from the graph (one per edge from a
consumer, as the engine's first pass does); the ready queue lists the nodes whose count is zero, in the order the
engine went on to run them. :func:`record_value` does the same for a ``Value`` graph by wrapping each node's
``_backward`` while *your* ``backward()`` runs; a node that ran before all its consumers had sent their share is
marked, because a hand-written engine can do that (PyTorch's cannot).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from . import graph as graphs
from .checking import fmt
from .sliders import hidden_script

# Box styles of the picture, by state (keyword arguments for matplotlib's FancyBboxPatch).
RUNNING = {"fc": "#fde047", "ec": "#a16207", "lw": 3.0}
READY = {"fc": "#bbf7d0", "ec": "#15803d", "lw": 2.0}
DONE = {"fc": "#f3f4f6", "ec": "#9ca3af", "lw": 1.0}


@dataclass(frozen=True)
class Send:
    """One contribution a node sent along one edge: to node ``to``, into slot ``slot`` of its buffer."""

    to: int
    slot: int
    value: Any


@dataclass(frozen=True)
class Step:
    """One node run: what it ran with (its complete buffer, one entry per output) and what it sent."""

    node: int
    buffer: tuple
    sends: tuple[Send, ...]


@dataclass(frozen=True)
class Frame:
    """The state after the first ``step`` nodes of a schedule have run (frame 0: nothing has run)."""

    step: int
    running: int | None                   # the node that ran at this step
    waiting: list[int]                    # per node: consumers that have not sent their share yet
    arrived: list[list[tuple[int, int, Any]]]  # per node: (sender, slot, contribution) received so far, in order
    ran: list[bool]
    ready: list[int]                      # count zero and not run yet, in the order the engine ran them
    early: bool                           # the running node still waited for a consumer (a wrong order)


@dataclass
class Schedule:
    """A backward pass as it really ran: the graph, each node's dependency count, and the steps in order."""

    graph: graphs.Graph
    names: list[str]         # one short name per node, for the text
    dependencies: list[int]  # per node: edges arriving from its consumers (the engine's first pass)
    steps: list[Step]
    engine: str
    _layout: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)

    @property
    def order(self) -> list[str]:
        """The names of the nodes in the order they ran."""
        return [self.names[step.node] for step in self.steps]

    def frame(self, k: int) -> Frame:
        """The state after ``k`` steps (0 <= k <= len(steps))."""
        if not 0 <= k <= len(self.steps):
            raise IndexError(f"frame {k} of a schedule with {len(self.steps)} steps")
        count = len(self.names)
        waiting = list(self.dependencies)
        arrived: list[list[tuple[int, int, Any]]] = [[] for _ in range(count)]
        ran = [False] * count
        early = False
        root = next((step for step in self.steps if step.node == 0), None)  # node 0 is the root
        if root is not None:  # the seed gradient
            arrived[0].extend((-1, slot, value) for slot, value in enumerate(root.buffer))
        for step in self.steps[:k]:
            early = waiting[step.node] > 0
            ran[step.node] = True
            for send in step.sends:
                waiting[send.to] -= 1
                arrived[send.to].append((step.node, send.slot, send.value))
        position = {step.node: i for i, step in enumerate(self.steps)}
        ready = sorted((i for i in range(count) if waiting[i] <= 0 and not ran[i] and i in position),
                       key=position.get)
        running = self.steps[k - 1].node if k else None
        return Frame(k, running, waiting, arrived, ran, ready, early)

    # ------------------------------------------------------------------------------------------- presentation

    def describe(self, k: int) -> str:
        """One or two sentences saying what happened at step ``k``."""
        if k == 0:
            return (f"Before backward: every node waits for its consumers. {self.names[0]} is the root; its buffer "
                    "holds the seed gradient, so it is the only node in the ready queue.")
        step = self.steps[k - 1]
        frame = self.frame(k)
        parts = self.frame(k - 1).arrived[step.node]
        text = f"Step {k} of {len(self.steps)}: {self.names[step.node]} runs with {_short(_flat(step.buffer))}"
        if len(parts) > len(step.buffer):
            text += f" (= {_sum_text(parts)}, summed at this branch point)"
        if frame.early:
            text += f", although it still waited for {self.frame(k - 1).waiting[step.node]} consumer(s): a wrong order"
        text += "."
        sends = [f"{_short(s.value)} to {self.names[s.to]} (which now waits for {frame.waiting[s.to]})"
                 for s in step.sends]
        if sends:
            text += " It sends " + "; ".join(sends) + "."
        elif self.graph.is_leaf[step.node]:
            text += " It is a leaf: the sum lands in its .grad."
        return text

    def status_html(self, k: int) -> str:
        """What step ``k`` did, in one short block: the engine, the step, the node that ran, :meth:`describe` and the
        ready queue (the stepper's live region: a screen reader announces it at every step)."""
        frame = self.frame(k)
        queue = ", ".join(self.names[i] for i in frame.ready) or "empty"
        running = self.names[frame.running] if frame.running is not None else "nothing yet"
        return (f'<div class="stepper-status"><b>{self.engine}</b> · step <span class="stepper-step">{k}</span> of '
                f'{len(self.steps)} · running: <span class="stepper-running">{_escape(running)}</span><br>'
                f"{_escape(self.describe(k))}<br>ready queue (next first): "
                f'<span class="stepper-ready">{_escape(queue)}</span></div>')

    def nodes_html(self, k: int) -> str:
        """The state of every node after step ``k``, as an HTML table (a caption and column headers: a screen reader
        can read it cell by cell)."""
        frame = self.frame(k)
        rows = []
        for i, name in enumerate(self.names):
            state, colour = _state(frame, i)
            buffer = _sum_text(frame.arrived[i]) or "–"
            if len(frame.arrived[i]) > len({slot for _, slot, _ in frame.arrived[i]}):
                buffer += f" = {_short(_total(frame.arrived[i]))}"
            rows.append(f'<tr style="background:{colour}"><th scope="row">{_escape(name)}</th>'
                        f'<td class="stepper-waits">{max(frame.waiting[i], 0)}</td>'
                        f"<td>{_escape(buffer)}</td><td>{state}</td></tr>")
        return (f'<table class="stepper-table"><caption>Every node after step {k} of {len(self.steps)}</caption>'
                '<tr><th scope="col">node</th><th scope="col">waits for</th><th scope="col">buffer (arrivals)</th>'
                '<th scope="col">state</th></tr>' + "".join(rows) + "</table>")

    def table_html(self, k: int) -> str:
        """:meth:`status_html` and :meth:`nodes_html` together (the state after step ``k`` as one block of HTML)."""
        return self.status_html(k) + self.nodes_html(k)

    def alt(self, k: int) -> str:
        """The text alternative of the picture of step ``k``: every node with its state (as its box says it) and every
        arrow, in words (:func:`autograder.graph.alt_text`)."""
        frame = self.frame(k)
        states = [_state_line(frame, i, _state(frame, i)[0]).replace("RUNS", "runs").replace(" · ", ", buffer ")
                  for i in range(len(self.names))]
        if self._layout is None:
            self._layout = _Layout.of(self)
        layout = "top to bottom" if self._layout.vertical else "left to right"
        return (f"The graph after step {k} of {len(self.steps)} of {self.engine}. "
                + graphs.alt_text(self.graph, states=states, layout=layout))

    def picture(self, k: int, ax=None):
        """Draw the graph in the state after step ``k``; returns the axes (see :func:`_draw` for the layout)."""
        frame = self.frame(k)
        labels, style = [], {}
        for i, label in enumerate(self.graph.labels):
            state, _ = _state(frame, i)
            labels.append(f"{label}\n{_state_line(frame, i, state)}")
            style[i] = {"runs": RUNNING, "ready": READY, "done": DONE}.get(state, {})
        if self._layout is None:
            self._layout = _Layout.of(self)
        return _draw(self.graph, labels, style, self._layout, ax)

    def png(self, k: int) -> bytes:
        """The picture of step ``k`` as PNG bytes (no pyplot: nothing is shown twice in a notebook), at SHARPNESS
        times the resolution it is shown at (:meth:`width_px`), so that text stays crisp on a high-density screen."""
        ax = self.picture(k)
        buffer = io.BytesIO()
        ax.figure.savefig(buffer, format="png", dpi=DPI * SHARPNESS)
        return buffer.getvalue()

    def width_px(self) -> int:
        """The width to show the picture at, in CSS pixels (DPI per inch of the figure)."""
        if self._layout is None:
            self._layout = _Layout.of(self)
        return round(self._layout.size[0] * DPI)


# ------------------------------------------------------------------------------------------------ the picture
# Labels are drawn at FONT_SIZE points and the picture is shown at DPI pixels per inch, so a letter is about 14 px tall
# on screen (the widget fixes the image's width: a flex box would otherwise stretch it to the cell's width). A graph
# is laid out by depth: leaves left and the root right (as autograder.graph draws it) when its levels fit side by
# side within MAX_WIDTH inches (the width of a notebook's output area, so that the browser does not shrink the
# picture), and otherwise top to bottom, the root at the top (backward then runs down the page). Every box gets the
# same cell, sized for the widest label the node will ever show, so that nothing moves from one step to the next.

FONT_SIZE = 10.0
DPI = 100
SHARPNESS = 2     # the PNG holds this many pixels per pixel shown
MAX_WIDTH = 9.0   # inches: 900 px at DPI
GAP = 0.4         # inches between two boxes
MARGIN = 0.15     # inches around the picture
PAD = 0.4         # the box's padding, in units of the font size


def _brief(value) -> str:
    """A value as the picture shows it: 4 significant digits, a tensor of more than 2 elements by its shape."""
    if isinstance(value, torch.Tensor):
        if value.numel() > 2:
            return f"tensor{tuple(value.shape)}"
        return "[" + ", ".join(_brief(float(v)) for v in value.reshape(-1).tolist()) + "]"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_brief(v) for v in value) + ")"
    return str(value)


def _state_line(frame: Frame, i: int, state: str) -> str:
    total = _total(frame.arrived[i])
    if state == "runs":
        return f"RUNS with {_brief(total)}"
    if state == "done":
        return "done"
    if state == "ready":
        return f"ready · {_brief(total)}"
    return f"waits for {frame.waiting[i]}" + (f" · {_brief(total)}" if frame.arrived[i] else "")


@dataclass(frozen=True)
class _Layout:
    """Where each node's box sits and the size of the figure, in inches; how much each edge bends (arc3's rad)."""

    position: dict[int, tuple[float, float]]
    size: tuple[float, float]
    vertical: bool
    bends: list[float]

    @staticmethod
    def of(schedule: Schedule) -> _Layout:
        from matplotlib.backends.backend_agg import RendererAgg
        from matplotlib.font_manager import FontProperties

        renderer, font = RendererAgg(10, 10, 72), FontProperties(size=FONT_SIZE)

        def inches(line: str) -> float:  # at 72 dpi a pixel is a point
            return renderer.get_text_width_height_descent(line, font, ismath=False)[0] / 72

        graph, widest, lines = schedule.graph, 0.0, 0
        ran_with = {step.node: _flat(step.buffer) for step in schedule.steps}
        for i, label in enumerate(graph.labels):  # the label and the longest state line the node can show
            buffer = _brief(ran_with.get(i))
            candidates = label.split("\n") + [f"RUNS with {buffer}", f"ready · {buffer}",
                                               f"waits for {schedule.dependencies[i]} · {buffer}"]
            widest = max(widest, *(inches(line) for line in candidates))
            lines = max(lines, label.count("\n") + 2)
        pad = 2 * PAD * FONT_SIZE / 72
        box_w, box_h = widest + pad, lines * 1.25 * FONT_SIZE / 72 + pad

        levels = max(graph.depth) + 1
        cross: dict[int, float] = {}
        for d in range(levels):  # order each level by where its consumers sit, to limit crossings
            def pull(i):
                ys = [cross[dst] for src, dst in graph.edges if src == i and dst in cross]
                return -sum(ys) / len(ys) if ys else 0.0
            members = sorted((i for i in range(len(graph.labels)) if graph.depth[i] == d), key=pull)
            cross.update({i: (len(members) - 1) / 2 - k for k, i in enumerate(members)})
        widest_level = max(graph.depth.count(d) for d in range(levels))
        vertical = levels * (box_w + GAP) > MAX_WIDTH and levels > widest_level
        cell_w, cell_h = box_w + GAP, box_h + GAP
        if vertical:  # the root at the top, one row per level; cross positions left to right
            position = {i: (-cross[i] * cell_w, -graph.depth[i] * cell_h) for i in cross}
        else:         # leaves left, the root right, one column per level
            position = {i: (-graph.depth[i] * cell_w, cross[i] * cell_h) for i in cross}

        # An edge that skips a level, or repeats one, curves away from the middle of the picture.
        xs, ys = [x for x, _ in position.values()], [y for _, y in position.values()]
        middle = ((max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2)
        bends, repeats, peaks = [], {}, []
        for src, dst in graph.edges:
            k = repeats[(src, dst)] = repeats.get((src, dst), -1) + 1
            span = graph.depth[src] - graph.depth[dst]
            bend = 0.3 * k + (0.6 / span if span > 1 else 0.0)
            (x0, y0), (x1, y1) = position[src], position[dst]
            # arc3 puts its control point at the chord's middle + rad·(dy, -dx); the curve peaks halfway there
            outward = (y1 - y0) * ((x0 + x1) / 2 - middle[0]) - (x1 - x0) * ((y0 + y1) / 2 - middle[1])
            bend = -bend if outward < 0 else bend
            bends.append(bend)
            peaks.append(((x0 + x1) / 2 + bend * (y1 - y0) / 2, (y0 + y1) / 2 - bend * (x1 - x0) / 2))
        left = min([x - cell_w / 2 for x in xs] + [x - MARGIN for x, _ in peaks])
        right = max([x + cell_w / 2 for x in xs] + [x + MARGIN for x, _ in peaks])
        bottom = min([y - cell_h / 2 for y in ys] + [y - MARGIN for _, y in peaks])
        top = max([y + cell_h / 2 for y in ys] + [y + MARGIN for _, y in peaks])
        position = {i: (x - left, y - bottom) for i, (x, y) in position.items()}
        return _Layout(position, (right - left, top - bottom), vertical, bends)


def _draw(graph: graphs.Graph, labels: list[str], style: dict, layout: _Layout, ax=None):
    """Boxes with ``labels`` at the layout's places, an arrow per edge (the way data flowed forward)."""
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=layout.size, dpi=DPI).add_axes((0, 0, 1, 1))
    boxes = {}
    for i, (x, y) in layout.position.items():
        fill, edge = ("#dbeafe", "#1d4ed8") if graph.is_leaf[i] else ("#ffedd5", "#c2410c")
        shape = "round" if graph.is_leaf[i] else "square"  # told apart by shape too (autograder.graph draws so)
        box = {"boxstyle": f"{shape},pad={PAD}", "fc": fill, "ec": edge, "lw": 2.2 if i == 0 else 1, **style.get(i, {})}
        boxes[i] = ax.text(x, y, labels[i], ha="center", va="center", fontsize=FONT_SIZE, zorder=2, bbox=box,
                           linespacing=1.25)
    for (src, dst), bend in zip(graph.edges, layout.bends):  # drawn after the boxes, clipped at their outlines
        ax.annotate("", xy=layout.position[dst], xytext=layout.position[src], zorder=3,
                    arrowprops=dict(arrowstyle="-|>", color="0.3", shrinkA=2, shrinkB=2,
                                    patchA=boxes[src].get_bbox_patch(), patchB=boxes[dst].get_bbox_patch(),
                                    connectionstyle=f"arc3,rad={bend}"))
    ax.set_xlim(0, layout.size[0])
    ax.set_ylim(0, layout.size[1])
    ax.axis("off")
    return ax


def _state(frame: Frame, i: int) -> tuple[str, str]:
    if frame.running == i:
        return "runs", RUNNING["fc"]
    if frame.ran[i]:
        return "done", DONE["fc"]
    if i in frame.ready:
        return "ready", READY["fc"]
    return "waiting", "white"


def _flat(buffer: tuple):
    return buffer[0] if len(buffer) == 1 else buffer


def _slots(arrivals: list[tuple[int, int, Any]]) -> dict[int, list]:
    slots: dict[int, list] = {}
    for _, slot, value in arrivals:
        slots.setdefault(slot, []).append(value)
    return dict(sorted(slots.items()))


def _total(arrivals: list[tuple[int, int, Any]]):
    """The buffer: the sum of the contributions in each slot (a tuple when the node has several outputs)."""
    totals = []
    for values in _slots(arrivals).values():
        values = [v for v in values if v is not None]
        total = values[0] if values else None
        for v in values[1:]:
            total = total + v
        totals.append(total)
    return None if not totals else totals[0] if len(totals) == 1 else tuple(totals)


def _sum_text(arrivals: list[tuple[int, int, Any]]) -> str:
    """The contributions being summed, e.g. "24 + 15", or "output 0: 1 + 2; output 1: 3" for several outputs."""
    slots = _slots(arrivals)
    parts = {slot: " + ".join(_short(v) for v in values) for slot, values in slots.items()}
    return parts[next(iter(parts))] if len(parts) == 1 else "; ".join(f"output {s}: {t}" for s, t in parts.items())


def _short(value) -> str:
    if isinstance(value, torch.Tensor) and value.numel() > 2:
        return f"tensor{tuple(value.shape)}"
    return fmt(value, limit=2) if isinstance(value, (torch.Tensor, float, int, tuple, list)) else str(value)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _named(names) -> list[tuple[Any, str]]:
    """(object, name) pairs from {obj: "name"}, {"name": obj}, pairs, or a list of objects (named [0], [1], ...)."""
    items = [] if names is None else list(names.items()) if isinstance(names, dict) else list(names)
    found = []
    for i, item in enumerate(items):
        obj, name = item if isinstance(item, tuple) else (item, f"[{i}]")
        if isinstance(obj, str):
            obj, name = name, obj
        found.append((obj, str(name)))
    return found


def _unique(labels: list[str]) -> list[str]:
    """Short names, made unique with #2, #3... (two MulBackward0 nodes)."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return out


def _detach(value):
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _value_of(value):
    """A 0-d tensor becomes a float, so that the text reads 39 rather than tensor(39.)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dim() == 0:
        return value.item()
    return value


# -------------------------------------------------------------------------------------------------- PyTorch


def _node_inputs(fn) -> list:
    return [child for child, _ in fn.next_functions if child is not None]


def record(loss: torch.Tensor, names=None, gradient: torch.Tensor | None = None) -> Schedule:
    """Run ``loss.backward()`` once with hooks on every node and return the schedule PyTorch's engine followed.

    ``names`` names tensors (leaves and intermediates) as in :func:`autograder.graph.show_graph`. The graph is kept
    (``retain_graph=True``) and every leaf's ``.grad`` is put back as it was; hooks you registered yourself still run.
    """
    if not isinstance(loss, torch.Tensor) or loss.grad_fn is None:
        raise ValueError("the stepper needs a tensor with a history (a grad_fn): compute it from tensors that "
                         "require grad, outside torch.no_grad()")
    named = _named(names)
    table = {id(obj): name for obj, name in named}
    order = graphs.topological(loss.grad_fn, _node_inputs)
    index = {node: i for i, node in enumerate(order)}

    def label(fn) -> str:
        leaf = getattr(fn, "variable", None)
        if leaf is not None:
            return f"{table.get(id(leaf), 'leaf')} {tuple(leaf.shape)}".replace(" ()", "")
        return fn.name()

    labels = [label(fn) for fn in order]
    tensor_names = {id(t.grad_fn): name for t, name in named if isinstance(t, torch.Tensor) and t.grad_fn is not None}
    short = _unique([f"{tensor_names[id(fn)]} = {lbl}" if id(fn) in tensor_names else lbl
                     for fn, lbl in zip(order, labels)])
    graph = graphs.graph_of(order, _node_inputs, lambda fn: short[index[fn]].replace(" = ", "\n", 1),
                            lambda fn: getattr(fn, "variable", None) is not None)
    dependencies = [0] * len(order)
    for src, _dst in graph.edges:
        dependencies[src] += 1

    steps: list[Step] = []
    pending: dict[int, tuple] = {}

    def before(fn):
        def hook(grad_outputs):
            pending[index[fn]] = tuple(_value_of(_detach(g)) for g in grad_outputs)
        return hook

    def after(fn):
        def hook(grad_inputs, grad_outputs):
            sends = tuple(Send(index[child], slot, _value_of(_detach(g)))
                          for (child, slot), g in zip(fn.next_functions, grad_inputs) if child is not None)
            steps.append(Step(index[fn], pending.pop(index[fn]), sends))
        return hook

    leaves = [fn.variable for fn in order if getattr(fn, "variable", None) is not None]
    saved = [None if leaf.grad is None else leaf.grad.detach().clone() for leaf in leaves]
    handles = []
    try:
        for fn in order:
            handles.append(fn.register_prehook(before(fn)))
            handles.append(fn.register_hook(after(fn)))
        try:
            loss.backward(gradient=gradient, retain_graph=True)
        except RuntimeError as error:
            if "second time" in str(error):
                raise RuntimeError("this graph was already freed by an earlier backward(): build the expression "
                                   "again, then step through it") from None
            raise
    finally:
        for handle in handles:
            handle.remove()
        with torch.no_grad():
            for leaf, grad in zip(leaves, saved):
                leaf.grad = grad
    for fn_index in list(pending):  # a node whose post-hook never fired (none known): keep what it received
        steps.append(Step(fn_index, pending.pop(fn_index), ()))
    return Schedule(graph, short, dependencies, steps, "PyTorch's engine")


# ----------------------------------------------------------------------------------------------- Value graphs


def record_value(out, names=None) -> Schedule:
    """Run ``out.backward()`` of an exercise-02 ``Value`` graph with every node's ``_backward`` watched, and return
    the order your engine ran them in, what each ran with (its ``.grad`` then) and what it added to each input.

    Every ``.grad`` starts from 0 for the run and is put back afterwards, as is every ``_backward``.
    """
    for attribute in ("_prev", "_backward", "grad", "data", "backward"):
        if not hasattr(out, attribute):
            raise TypeError(f"show_value needs an exercise-02 Value (it has no .{attribute}); for a tensor use show()")
    table = {id(obj): name for obj, name in _named(names)}
    inputs: Callable = lambda node: list(node._prev)  # noqa: E731
    order = graphs.topological(out, inputs)
    index = {id(node): i for i, node in enumerate(order)}

    def label(node) -> str:
        data = _brief(float(node.data))
        if id(node) in table:
            return f"{table[id(node)]} = {getattr(node, '_op', '') or 'leaf'}\n{data}"
        return f"{getattr(node, '_op', '') or 'leaf'}\n{data}"

    graph = graphs.graph_of(order, inputs, label, lambda node: not node._prev)
    short = graphs.node_names(graph)  # as the picture's text alternative numbers them (#1, #2 in reading order)
    dependencies = [0] * len(order)
    for src, _dst in graph.edges:
        dependencies[src] += 1

    steps: list[Step] = []
    originals = [node.__dict__.get("_backward") for node in order]
    saved_grads = [node.grad for node in order]

    def watched(node, rule):
        def run():
            before = [child.grad for child in node._prev]
            received = node.grad
            rule()
            sends = tuple(Send(index[id(child)], 0, float(child.grad) - float(b))
                          for child, b in zip(node._prev, before))
            steps.append(Step(index[id(node)], (float(received),), sends))
        return run

    try:
        for node in order:
            node.grad = 0.0
            node._backward = watched(node, node._backward)
        out.backward()
    finally:
        for node, rule, grad in zip(order, originals, saved_grads):
            if rule is None:
                node.__dict__.pop("_backward", None)
            else:
                node._backward = rule
            node.grad = grad
    return Schedule(graph, short, dependencies, steps, "your Value.backward()")


# -------------------------------------------------------------------------------------------------- the widget


#: Run by JupyterLab when it renders a stepper's hidden Output (``element`` is that output's node): find the status
#: line of the same stepper and make it a live region, so that a screen reader announces each step. ipywidgets 8
#: replaces an HTML widget's content at every change but keeps its content element, which therefore carries the
#: region. The stepper may be rendered before or after its Output; the script looks for a few seconds.
LIVE_REGION_JS = """
(() => {
  const started = Date.now();
  const mark = () => {
    const box = element.closest('.stepper-widget');
    const status = box && box.querySelector('.stepper-live > .widget-html-content');
    if (status) {
      status.setAttribute('role', 'status');
      status.setAttribute('aria-live', 'polite');
      status.setAttribute('aria-atomic', 'true');
    } else if (Date.now() - started < 10000) {
      setTimeout(mark, 100);
    }
  };
  mark();
})();
"""

#: What the picture's caption says (the states are written in the boxes: colour is never the only sign).
CAPTION = ("Leaves are rounded boxes, operations square ones; arrows point the way data flowed forward, and backward "
           "walks them back. Each box says its state: RUNS with its buffer (thickest border), ready, waits for n, or "
           "done. The status below says what the step did.")
#: The buttons: what each says and what it does (its tooltip).
BUTTONS = {"« start": "go back to the start: nothing has run yet", "◀ back": "go back one step",
           "step ▶": "run the next node", "run to end »": "run every remaining node"}


class Stepper:
    """The widget: buttons, the picture (with its text alternative and caption), the status line (a live region) and
    the table, for one :class:`Schedule`."""

    def __init__(self, schedule: Schedule):
        import ipywidgets as widgets

        self.schedule = schedule
        self.step = 0
        self._pngs: dict[int, bytes] = {}
        self.buttons = {name: widgets.Button(description=name, tooltip=tip, layout=widgets.Layout(width="auto"))
                        for name, tip in BUTTONS.items()}
        moves = {"« start": lambda: 0, "◀ back": lambda: self.step - 1, "step ▶": lambda: self.step + 1,
                 "run to end »": lambda: len(self.schedule.steps)}
        for name, button in self.buttons.items():
            button.on_click(lambda _button, move=moves[name]: self.go(move()))
        self.picture = widgets.HTML(layout=widgets.Layout(max_width="100%"), _dom_classes=["stepper-picture"])
        self.status = widgets.HTML(_dom_classes=["stepper-live"])
        self.table = widgets.HTML()
        self.widget = widgets.VBox([widgets.HBox(list(self.buttons.values())), self.picture, self.status,
                                    self.table, hidden_script(LIVE_REGION_JS)], _dom_classes=["stepper-widget"])
        self.go(0)

    def png(self) -> bytes:
        """The picture shown now, as PNG bytes."""
        return self._pngs[self.step]

    def picture_html(self, k: int) -> str:
        """The picture of the state after ``k`` steps, with its text alternative and caption (drawn once)."""
        from .figures import figure_html

        if k not in self._pngs:
            self._pngs[k] = self.schedule.png(k)
        return figure_html(self._pngs[k], self.schedule.alt(k), CAPTION, width_px=self.schedule.width_px())

    def go(self, k: int) -> None:
        """Show the state after ``k`` steps (clamped to the schedule)."""
        self.step = max(0, min(k, len(self.schedule.steps)))
        self.picture.value = self.picture_html(self.step)
        self.status.value = self.schedule.status_html(self.step)
        self.table.value = self.schedule.nodes_html(self.step)
        self.buttons["◀ back"].disabled = self.buttons["« start"].disabled = self.step == 0
        self.buttons["step ▶"].disabled = self.buttons["run to end »"].disabled = \
            self.step == len(self.schedule.steps)

    def static_html(self) -> str:
        """Two states, for a page that cannot run the widget: halfway (nodes waiting, a queue) and after the last step
        (picture, status, table)."""
        last = len(self.schedule.steps)
        return ("<p><em>Halfway, then after the last step: run the notebook to step through it.</em></p>"
                + "".join(self.picture_html(k) + self.schedule.table_html(k) for k in sorted({last // 2, last})))

    def _ipython_display_(self) -> None:
        from .figures import show_widget

        show_widget(self.widget, self.static_html())


def show(loss: torch.Tensor, names=None, gradient: torch.Tensor | None = None) -> None:
    """Step through PyTorch's backward pass of ``loss`` (one real run, recorded with hooks; see :func:`record`)."""
    from IPython.display import display

    display(Stepper(record(loss, names, gradient)))


def show_value(out, names=None) -> None:
    """Step through your exercise-02 ``Value`` engine's backward pass of ``out`` (see :func:`record_value`)."""
    from IPython.display import display

    display(Stepper(record_value(out, names)))
