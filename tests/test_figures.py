"""Figures everyone can read (issue 37): the colour difference is computed right, the course's palette is told apart
under every simulated colour-vision deficiency, a figure that tells series apart by colour alone is refused, and a
shown figure keeps its text alternative and caption."""

from __future__ import annotations

import itertools
import re

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt
import pytest

from autograder import figures

#: Sharma, Wu and Dalal's published test pairs for CIEDE2000 (L, a, b) x2 -> ΔE00, a selection across the hues.
SHARMA = [((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
          ((50.0, -1.3802, -84.2814), (50.0, 0.0, -82.7485), 1.0),
          ((50.0, 2.5, 0.0), (50.0, 0.0, -2.5), 4.3065),
          ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
          ((50.0, 2.5, 0.0), (50.0, 3.2592, 0.335), 1.0),
          ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
          ((22.7233, 20.0904, -46.694), (23.0331, 14.973, -42.5619), 2.0373),
          ((90.8027, -2.0831, 1.441), (91.1528, -1.6435, 0.0447), 1.4441),
          ((2.0776, 0.0795, -1.135), (0.9033, -0.0636, -0.5514), 0.9082)]


@pytest.mark.parametrize("lab1, lab2, expected", SHARMA)
def test_ciede2000_matches_the_published_pairs(lab1, lab2, expected):
    assert figures.ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)
    assert figures.ciede2000(lab2, lab1) == pytest.approx(expected, abs=1e-4)


def test_the_palette_is_told_apart_by_everyone():
    for one, other in itertools.combinations(figures.PALETTE, 2):
        distances = figures.seen_apart(one, other)
        assert min(distances.values()) >= figures.DISTINGUISHABLE, (one, other, distances)


def test_matplotlibs_default_blue_and_purple_are_not_for_everyone():
    """What the issue measured in lesson 11: two of matplotlib's default colours merge under a deficiency."""
    assert min(figures.seen_apart("#1f77b4", "#9467bd").values()) < figures.DISTINGUISHABLE


def test_a_figure_that_tells_series_apart_by_colour_alone_is_refused():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], color="#1f77b4", label="W2")
    ax.plot([0, 1], [1, 0], color="#9467bd", label="b2")
    with pytest.raises(figures.Indistinct, match="'W2' and 'b2' differ only by colour"):
        figures.check_series(fig)
    ax.get_lines()[1].set_linestyle("--")  # a second cue besides colour: fine
    figures.check_series(fig)
    plt.close(fig)


def test_the_course_style_gives_every_series_a_colour_marker_and_style():
    figures.apply_style()
    fig, ax = plt.subplots()
    for k in range(5):
        ax.plot([0, 1], [k, k + 1], label=f"series {k}")
    figures.check_series(fig)
    lines = ax.get_lines()
    assert len({(line.get_marker(), line.get_linestyle()) for line in lines}) == 5
    plt.close(fig)


def test_a_shown_figure_keeps_its_text_alternative_and_caption(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda data, raw=False: shown.append(data))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="loss")
    figures.show(fig, alt="A line rising from 0 to 1.", caption="The loss grows <fast>.")
    (data,) = shown
    assert "alt='A line rising from 0 to 1.'" in data["text/html"]
    assert "<figcaption>The loss grows &lt;fast&gt;.</figcaption>" in data["text/html"]
    assert data["text/plain"].startswith("[figure: A line rising") and data["image/png"]
    with pytest.raises(ValueError, match="text alternative"):
        figures.show(plt.subplots()[0], alt=" ", caption="x")


def rising_line(slope=1.0):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, slope], label="loss")
    figures.show(fig, alt=f"A line rising to {slope:g}.", caption="The loss.")


def test_a_widget_shows_a_picture_where_widgets_are_not_drawn(tmp_path):
    """The widgets' output carries its static view: nbconvert, without the widgets' state, exports the figure the
    controls start at (and the controls' names), where it would otherwise export a widget's repr."""
    import ipywidgets as widgets
    import nbformat
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from nbconvert import HTMLExporter

    InteractiveShell.instance()
    with capture_output() as captured:
        figures.show_interactive(rising_line, slope=widgets.FloatSlider(value=2.5, description="slope"),
                                 also_at=[{"slope": -1.0}])
    (output,) = [o for o in captured.outputs if "application/vnd.jupyter.widget-view+json" in o.data]
    static = output.data["text/html"]
    assert "alt='A line rising to 2.5.'" in static and "slope 2.5" in static and "alt='A line rising to -1.'" in static
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output(
        "display_data", data=output.data)])])
    page, _ = HTMLExporter().from_notebook_node(notebook)
    assert re.search(r"<img [^>]*alt=.A line rising to 2\.5\.", page), "the exported page shows the figure"
    assert "interactive(children=" not in page
    with pytest.raises(TypeError, match="has a view"):
        figures.show_widget(widgets.fixed(1.0), "<p>no</p>")
