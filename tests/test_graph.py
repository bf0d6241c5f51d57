"""The graph drawing helper reads exactly what autograd recorded."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

from autograder.graph import build_graph, draw_graph, to_mermaid, to_text


def two_routes():
    x = torch.tensor(3.0, requires_grad=True)
    y = torch.tensor(5.0, requires_grad=True)
    return x * y + x, x, y


def test_branch_point_gives_two_edges_from_the_same_leaf():
    z, x, y = two_routes()
    graph = build_graph(z, names={x: "x", y: "y"})
    (x_node,) = [i for i, label in enumerate(graph.labels) if label.startswith("x\n")]
    assert sum(1 for source, _ in graph.edges if source == x_node) == 2
    assert graph.labels[0].startswith("AddBackward0") and graph.depth[0] == 0
    assert sum(graph.is_leaf) == 2


def test_every_consumer_comes_before_its_inputs():
    z, x, y = two_routes()
    graph = build_graph(torch.tanh(z * z), names=[x, y])
    assert all(consumer < source for source, consumer in graph.edges)


def test_text_and_mermaid_name_the_leaves():
    z, x, y = two_routes()
    assert "flowchart" in to_mermaid(z, names={"x": x, "y": y})
    text = to_text(z, names={x: "x", y: "y"})
    assert "x" in text and "MulBackward0" in text


def test_tensor_without_history_is_a_clear_error():
    with pytest.raises(ValueError):
        build_graph(torch.ones(2))


def test_draws_without_a_display():
    z, x, y = two_routes()
    assert draw_graph(z, names={x: "x", y: "y"}) is not None


def test_backward_follows_next_functions_the_way_they_point():
    """Lesson 02's sentence: backward starts at the root and walks next_functions in their own direction (the drawn
    arrows, which follow the data, point the other way)."""
    z, x, y = two_routes()
    out = torch.tanh(z * z)
    nodes, todo = [], [out.grad_fn]
    while todo:
        node = todo.pop()
        if all(node is not seen for seen in nodes):
            nodes.append(node)
            todo += [child for child, _ in node.next_functions if child is not None]
    ran = []
    for node in nodes:
        node.register_prehook(lambda grad_outputs, node=node: ran.append(node))
    out.backward()
    when = {id(node): i for i, node in enumerate(ran)}
    assert ran[0] is out.grad_fn and len(ran) == len(nodes)
    assert all(when[id(node)] < when[id(child)]
               for node in ran for child, _ in node.next_functions if child is not None)
    graph = build_graph(out, names={x: "x", y: "y"})
    assert all(consumer < source for source, consumer in graph.edges)  # drawn from input to consumer, root = 0


# ------------------------------------------------------------------------------------- for every reader (issue 37)

def test_the_text_alternative_names_every_node_and_every_arrow():
    """What the picture shows, in words: the leaves and the operations with their shapes, the root, and one sentence
    per arrow, from the leaves to the root; nodes that share a label are numbered."""
    from autograder.graph import alt_text

    z, x, y = two_routes()
    text = alt_text(z, names={x: "x", y: "y"})
    assert "4 boxes and 4 arrows" in text and "Leaves (rounded boxes): x, shape (); y, shape ()." in text
    assert "AddBackward0, shape () (the root)" in text
    assert text.count(" feeds ") == len(build_graph(z, names={x: "x", y: "y"}).edges)
    assert text.index("x feeds MulBackward0") < text.index("feeds AddBackward0")  # leaves first
    twice = alt_text(x * y * x, names={x: "x", y: "y"})
    assert "MulBackward0 #1" in twice and "MulBackward0 #2" in twice


def test_leaves_and_operations_differ_in_shape_and_the_mermaid_describes_itself():
    z, x, y = two_routes()
    ax = draw_graph(z, names={x: "x", y: "y"})
    shapes = {text.get_text().split("\n")[0]: type(text.get_bbox_patch().get_boxstyle()).__name__
              for text in ax.texts if text.get_bbox_patch() is not None}
    assert shapes == {"x": "Round", "y": "Round", "MulBackward0": "Square", "AddBackward0": "Square"}
    mermaid = to_mermaid(z, names={x: "x", y: "y"})
    assert "accTitle: " in mermaid and "accDescr: Computation graph drawn left to right" in mermaid


def test_show_drawing_shows_the_picture_with_its_text_alternative(monkeypatch):
    from autograder.graph import alt_text, show_drawing

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda data, raw=False: shown.append(data))
    z, x, y = two_routes()
    show_drawing(z, names={x: "x", y: "y"}, caption="x reaches z twice: dz/dx = y + 1.")
    (data,) = shown
    assert f"alt='{alt_text(z, names={x: 'x', y: 'y'})}'" in data["text/html"]
    assert "<figcaption>x reaches z twice: dz/dx = y + 1.</figcaption>" in data["text/html"]
