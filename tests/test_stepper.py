"""The backward stepper shows the schedule the engine really ran: checked against hooks registered independently."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

from autograder import stepper
from autograder.graph import topological


def running_example():
    """Lesson 03's L = q·p + p with p = 3x, q = x², at x = 2 (dL/dx = 39)."""
    x = torch.tensor(2.0, requires_grad=True)
    p = 3 * x
    q = x**2
    r = q * p
    L = r + p
    return L, {x: "x", p: "p", q: "q", r: "r", L: "L"}


def mlp_loss():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    inputs, targets = torch.randn(5, 3), torch.tensor([0, 1, 1, 0, 1])
    return torch.nn.functional.cross_entropy(model(inputs), targets), dict(model.named_parameters())


def reuse_and_split():
    torch.manual_seed(1)
    x = torch.randn(4, requires_grad=True)
    a, b = x.split(2)
    return (a * b).sum() + (x * x).sum() + a.sum(), {x: "x"}


EXPRESSIONS = {"running example": running_example, "mlp": mlp_loss, "reuse and split": reuse_and_split}


def engine_order(loss) -> list:
    """The nodes in the order PyTorch runs them, seen by pre-hooks registered here (not by the stepper)."""
    nodes = topological(loss.grad_fn, lambda fn: [c for c, _ in fn.next_functions if c is not None])
    seen = []
    handles = [node.register_prehook(lambda grads, node=node: seen.append(node)) for node in nodes]
    loss.backward(retain_graph=True)
    for handle in handles:
        handle.remove()
    return [nodes.index(node) for node in seen]


@pytest.mark.parametrize("build", EXPRESSIONS.values(), ids=EXPRESSIONS)
def test_the_recorded_order_is_the_one_hooks_see(build):
    loss, names = build()
    schedule = stepper.record(loss, names)
    assert [step.node for step in schedule.steps] == engine_order(loss)


@pytest.mark.parametrize("build", EXPRESSIONS.values(), ids=EXPRESSIONS)
def test_each_buffer_is_the_sum_of_what_arrived_and_no_node_runs_early(build):
    loss, names = build()
    schedule = stepper.record(loss, names)
    for k, step in enumerate(schedule.steps, start=1):
        before = schedule.frame(k - 1)
        assert before.waiting[step.node] == 0 and step.node in before.ready  # ready when it ran
        assert not schedule.frame(k).early
        total = stepper._total(before.arrived[step.node])
        for slot, received in enumerate(step.buffer):
            expected = total if len(step.buffer) == 1 else total[slot]
            torch.testing.assert_close(torch.as_tensor(received), torch.as_tensor(expected))
    last = schedule.frame(len(schedule.steps))
    assert all(last.ran) and all(w == 0 for w in last.waiting) and last.ready == []


def test_running_example_counts_queue_and_sums():
    loss, names = running_example()
    schedule = stepper.record(loss, names)
    name = dict(enumerate(schedule.names))
    assert [n.split(" = ")[0] for n in schedule.order] == ["L", "r", "q", "p", "x"]
    assert {name[i].split(" = ")[0]: d for i, d in enumerate(schedule.dependencies)} == \
        {"L": 0, "r": 1, "p": 2, "q": 1, "x": 2}
    x = schedule.names.index("x")
    after_q = schedule.frame(3)
    assert after_q.waiting[x] == 1 and [v for _, _, v in after_q.arrived[x]] == [24.0]
    assert [schedule.names[i].split(" = ")[0] for i in after_q.ready] == ["p"]
    assert schedule.steps[-1].buffer == (39.0,)
    assert "24 + 15" in schedule.describe(5) and "summed at this branch point" in schedule.describe(5)


def test_a_node_used_twice_by_one_consumer_waits_for_two_sends():
    x = torch.tensor(3.0, requires_grad=True)
    schedule = stepper.record(x * x, {x: "x"})
    assert schedule.dependencies == [0, 2]
    assert [send.value for send in schedule.steps[0].sends] == [3.0, 3.0]
    assert schedule.steps[1].buffer == (6.0,)


def test_recording_leaves_grads_and_the_graph_as_they_were():
    loss, names = running_example()
    x = next(t for t, n in names.items() if n == "x")
    stepper.record(loss, names)
    assert x.grad is None
    x.grad = torch.tensor(5.0)
    stepper.record(loss, names)
    assert x.grad.item() == 5.0
    loss.backward()  # the graph was kept
    assert x.grad.item() == 44.0


def test_a_freed_graph_and_a_tensor_without_history_are_explained():
    loss, names = running_example()
    loss.backward()
    with pytest.raises(RuntimeError, match="already freed"):
        stepper.record(loss, names)
    with pytest.raises(ValueError, match="history"):
        stepper.record(torch.tensor(1.0))


# ------------------------------------------------------------------------------------------------ Value graphs

class Value:
    """Exercise 02's engine in brief: topological sort, then the rules in reverse."""

    def __init__(self, data, children=(), op=""):
        self.data, self.grad, self._prev, self._op = float(data), 0.0, set(children), op
        self._backward = lambda: None

    def __add__(self, other):
        out = type(self)(self.data + other.data, (self, other), "+")

        def _backward():
            self.grad += out.grad
            other.grad += out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        out = type(self)(self.data * other.data, (self, other), "*")

        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = _backward
        return out

    def tanh(self):
        out = type(self)(math.tanh(self.data), (self,), "tanh")

        def _backward():
            self.grad += (1 - out.data**2) * out.grad
        out._backward = _backward
        return out

    def topological(self):
        order, seen = [], set()

        def visit(node):
            if node not in seen:
                seen.add(node)
                for child in node._prev:
                    visit(child)
                order.append(node)
        visit(self)
        return order

    def backward(self):
        self.grad = 1.0
        for node in reversed(self.topological()):
            node._backward()


class BreadthFirstValue(Value):
    """A wrong engine: runs nodes in the order a breadth-first walk first meets them."""

    def backward(self):
        self.grad, queue, seen = 1.0, [self], {self}
        while queue:
            node = queue.pop(0)
            node._backward()
            for child in node._prev:
                if child not in seen:
                    seen.add(child)
                    queue.append(child)


def value_expression(kind=Value):
    """(tanh(tanh(p)) + p) · y with p = 3x: p reaches the output by a short and a long route."""
    x, y = kind(0.5), kind(-1.5)
    p = x * kind(3.0)
    return ((p.tanh()).tanh() + p) * y, x, y


def test_value_schedule_is_your_engines_order_and_gradients():
    out, x, y = value_expression()
    x.grad = 7.0
    schedule = stepper.record_value(out, {x: "x", y: "y"})
    assert x.grad == 7.0 and all(callable(n._backward) for n in out.topological())  # put back
    assert len(schedule.steps) == len(out.topological())
    x_index = schedule.names.index("x = leaf")
    x_step = next(step for step in schedule.steps if step.node == x_index)
    x.grad = 0.0
    out.backward()
    assert x_step.buffer[0] == pytest.approx(x.grad)
    assert not any(schedule.frame(k).early for k in range(len(schedule.steps) + 1))


def test_the_course_reference_engine_steps_too():
    """Lesson 11 steps through the course's ``ReferenceValue``: the stepper swaps each node's own ``_backward`` (read
    from its ``__dict__``), so that engine keeps one (``__slots__`` broke the lesson once)."""
    from autograder.references import ReferenceValue

    out, x, y = value_expression(ReferenceValue)
    schedule = stepper.record_value(out, {x: "x", y: "y"})
    x_step = next(step for step in schedule.steps if step.node == schedule.names.index("x = leaf"))
    out.backward()
    assert x_step.buffer[0] == pytest.approx(x.grad)


def test_a_wrong_value_order_is_marked():
    out, x, y = value_expression(BreadthFirstValue)
    schedule = stepper.record_value(out, {x: "x", y: "y"})
    early = [k for k in range(1, len(schedule.steps) + 1) if schedule.frame(k).early]
    assert early and "a wrong order" in schedule.describe(early[0])


def test_show_value_refuses_a_tensor():
    with pytest.raises(TypeError, match="show\\(\\)"):
        stepper.record_value(torch.tensor(1.0, requires_grad=True) * 2)


# ---------------------------------------------------------------------------------------------------- the widget

def test_three_clicks_follow_the_engine():
    loss, names = running_example()
    widget = stepper.Stepper(stepper.record(loss, names))
    assert widget.buttons["◀ back"].disabled and "running: <span class=\"stepper-running\">nothing yet" in \
        widget.status.value
    pictures = {widget.png()}
    for k, expected in enumerate(["L", "r", "q"], start=1):
        widget.buttons["step ▶"].click()
        assert widget.step == k
        assert f'<span class="stepper-running">{expected} = ' in widget.status.value
        pictures.add(widget.png())
    assert len(pictures) == 4  # every frame is drawn differently
    widget.buttons["◀ back"].click()
    assert widget.step == 2
    widget.buttons["run to end »"].click()
    assert widget.step == 5 and widget.buttons["step ▶"].disabled
    widget.buttons["« start"].click()
    assert widget.step == 0


# ------------------------------------------------------------------------------------------ the picture (issue 23)

def capstone_value_step():
    """Lesson 11's miniature on a scalar engine: one point, two hidden units, a hinge (20 nodes, 9 levels)."""
    w1, w2, v1, v2, c = (Value(v) for v in (0.5, -1.0, 0.8, -0.6, 0.1))
    h1, h2 = (w1 * Value(0.4)).tanh(), (w2 * Value(-0.2)).tanh()
    out = (v1 * h1 + v2 * h2 + c) * Value(-1.0) + Value(1.0)
    return stepper.record_value(out.tanh(), {w1: "w1", w2: "w2", v1: "v1", v2: "v2", c: "c", h1: "h1", h2: "h2"})


def capstone_tensor_step():
    """Lesson 11's digits step: cross-entropy of a tanh MLP on 5 examples (11 nodes, 8 levels)."""
    torch.manual_seed(0)
    W1, b1 = torch.randn(64, 32, requires_grad=True), torch.zeros(32, requires_grad=True)
    W2, b2 = torch.randn(32, 10, requires_grad=True), torch.zeros(10, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(torch.tanh(torch.randn(5, 64) @ W1 + b1) @ W2 + b2,
                                             torch.tensor([0, 1, 2, 3, 4]))
    return stepper.record(loss, {W1: "W1", b1: "b1", W2: "W2", b2: "b2"})


def labels_of(ax) -> list:
    """The node labels drawn on ``ax`` (the arrows are annotations, also texts, without a box)."""
    return [text for text in ax.texts if text.get_bbox_patch() is not None]


PICTURES = {"lesson 03": lambda: stepper.record(*running_example()), "mlp": lambda: stepper.record(*mlp_loss()),
            "capstone value step": capstone_value_step, "capstone tensor step": capstone_tensor_step}


@pytest.mark.parametrize("build", PICTURES.values(), ids=PICTURES)
def test_every_frame_is_readable(build):
    """Labels at 10 pt in a picture shown at 100 px an inch (14 px letters) that a notebook need not shrink (at most 9.5
    inches wide, 950 px); no two boxes overlap, none leaves the picture, and the boxes stay in place from one step to
    the next."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    schedule = build()
    places = None
    last = len(schedule.steps)
    for k in sorted({0, 1, last // 2, last}):  # drawing is slow: a few frames
        ax = schedule.picture(k)
        figure = ax.figure
        canvas = FigureCanvasAgg(figure)
        canvas.draw()  # sizes the boxes around their text
        boxes = [text.get_bbox_patch().get_window_extent(canvas.get_renderer()) for text in labels_of(ax)]
        assert all(text.get_fontsize() >= 10 for text in labels_of(ax))
        assert len(boxes) == len(schedule.names)
        assert figure.get_size_inches()[0] <= 9.5, figure.get_size_inches()
        for i, box in enumerate(boxes):
            assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= figure.bbox.width and box.y1 <= figure.bbox.height
            assert not any(box.overlaps(other) for other in boxes[i + 1:]), schedule.graph.labels[i]
        centres = [tuple(text.get_position()) for text in labels_of(ax)]
        assert places is None or centres == places
        places = centres
    assert schedule.png(0)[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_shallow_graph_reads_left_to_right_and_a_deep_one_top_down():
    shallow, deep = stepper.record(*running_example()), capstone_tensor_step()
    for schedule, vertical in ((shallow, False), (deep, True)):
        ax = schedule.picture(0)
        x, y = zip(*(text.get_position() for text in labels_of(ax)))
        root, leaf = 0, schedule.graph.depth.index(max(schedule.graph.depth))
        if vertical:   # the root on top, the deepest leaf at the bottom
            assert y[root] == max(y) and y[leaf] == min(y)
        else:          # the root right, the deepest leaf left (as autograder.graph draws it)
            assert x[root] == max(x) and x[leaf] == min(x)


def test_the_picture_shows_values_to_four_significant_digits():
    schedule = capstone_value_step()
    labels = " ".join(text.get_text() for text in labels_of(schedule.picture(len(schedule.steps))))
    assert "0.1974" in labels and "0.19737532" not in labels  # tanh(0.2), as the box shows it


def test_the_widget_shows_the_picture_at_its_own_width_and_twice_as_sharp():
    """A flex box stretches an image to its cell's width (tiny or blurred labels): the widget fixes the width to the
    picture's (at most the cell's), and the PNG holds twice the pixels for high-density screens."""
    import struct

    schedule = capstone_tensor_step()
    widget = stepper.Stepper(schedule)
    width = schedule.width_px()
    assert f"width='{width}'" in widget.picture.value and "max-width:100%" in widget.picture.value
    png_width = struct.unpack(">I", widget.png()[16:20])[0]
    assert abs(png_width - stepper.SHARPNESS * width) <= stepper.SHARPNESS
    assert 300 <= width <= 950


# ------------------------------------------------------------------------------------- for every reader (issue 37)

def test_every_frame_has_a_text_alternative_with_each_node_its_state_and_every_arrow():
    """The picture says in words what it shows: every node by name with the state its box shows (the state is written,
    never only coloured) and every arrow; a visible caption says how to read it."""
    import html
    import re

    loss, names = running_example()
    schedule = stepper.record(loss, names)
    widget = stepper.Stepper(schedule)
    for k in range(len(schedule.steps) + 1):
        widget.go(k)
        alt = html.unescape(re.search(r"alt='([^']*)'", widget.picture.value).group(1))
        assert alt == schedule.alt(k) and f"after step {k} of 5" in alt
        assert all(name.split(" = ")[0] in alt for name in schedule.names)
        assert alt.count(" feeds ") == len(schedule.graph.edges) == 6
        assert "<figcaption>" in widget.picture.value and "RUNS" in widget.picture.value
    assert "q, PowBackward0: runs with 6" in schedule.alt(3) and "x: waits for 1, buffer 24" in schedule.alt(3)
    assert "p, MulBackward0: ready, buffer 5" in schedule.alt(3) and "r, MulBackward0: done" in schedule.alt(3)


def test_the_status_line_is_a_live_region_of_its_own():
    """The status (what the step did) is its own widget, marked for the script that makes it a live region
    (role="status", polite, atomic) when JupyterLab renders the stepper; the table of nodes is apart from it, with a
    caption and headers; every button has a name and a tooltip saying what it does."""
    loss, names = running_example()
    widget = stepper.Stepper(stepper.record(loss, names))
    assert "stepper-live" in widget.status._dom_classes and "stepper-widget" in widget.widget._dom_classes
    assert widget.status.value.startswith('<div class="stepper-status">') and "<table" not in widget.status.value
    assert "<caption>" in widget.table.value and 'scope="col"' in widget.table.value
    (announcer,) = [child for child in widget.widget.children if child.__class__.__name__ == "Output"]
    script = announcer.outputs[0]["data"]["application/javascript"]
    assert announcer.layout.display == "none" and ".stepper-live > .widget-html-content" in script
    assert all(f"'{name}', '{value}'" in script
               for name, value in (("role", "status"), ("aria-live", "polite"), ("aria-atomic", "true")))
    assert all(button.description and button.tooltip for button in widget.buttons.values())
    widget.buttons["step ▶"].click()
    assert "Step 1 of 5: L = AddBackward0 runs with 1" in widget.status.value


def test_leaves_and_operations_differ_in_shape_not_only_in_colour():
    loss, names = running_example()
    schedule = stepper.record(loss, names)
    boxes = {text.get_text().split("\n")[0]: type(text.get_bbox_patch().get_boxstyle()).__name__
             for text in labels_of(schedule.picture(0))}
    assert boxes.pop("x") == "Round" and set(boxes.values()) == {"Square"}
