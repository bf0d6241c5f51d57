"""Figures everyone can read: every plot of the course is shown with a text alternative and a visible caption, and its
series are told apart by more than colour.

:func:`show` renders a matplotlib figure as ``<figure><img alt=...><figcaption>...`` (HTML, which JupyterLab, the
HTML exports and nbgrader's feedback pages all keep; a bare ``image/png`` output loses its text alternative in an
export), with the PNG and the alt text as fallbacks. Before it shows a figure it checks that any two plotted series of
an axes that share their marker and line style differ in colour for everyone: their CIEDE2000 distance under
simulated deuteranopia, protanopia and tritanopia (Machado et al. 2009, full severity) is at least
:data:`DISTINGUISHABLE`. :data:`PALETTE` (Okabe and Ito's) passes for every pair; :func:`apply_style` makes it, with
a marker and a line style per series, matplotlib's default cycle.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import math

import numpy as np

#: Okabe and Ito's colour-blind-safe palette (black first: the first series reads on any background).
PALETTE = ("#000000", "#E69F00", "#0072B2", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")
#: The smallest CIEDE2000 distance at which two series' colours count as told apart (2.3 is a just noticeable
#: difference on a patch; thin lines and small markers need far more).
DISTINGUISHABLE = 10.0

#: Colour-vision deficiency simulation, Machado, Oliveira and Fernandes (2009), severity 1, on linear sRGB.
CVD = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}


def _linear(rgb: np.ndarray) -> np.ndarray:
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _lab(linear: np.ndarray) -> np.ndarray:
    """CIELAB (D65) of linear sRGB."""
    xyz = linear @ np.array([[0.4124564, 0.2126729, 0.0193339], [0.3575761, 0.7151522, 0.1191920],
                             [0.1804375, 0.0721750, 0.9503041]])
    ratio = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(ratio > (6 / 29) ** 3, np.cbrt(ratio), ratio / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def ciede2000(lab1, lab2) -> float:
    """The CIEDE2000 colour difference of two CIELAB colours (Sharma, Wu and Dalal 2005)."""
    L1, a1, b1 = lab1
    L2, a2, b2 = lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar**7 / (c_bar**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dl, dc = L2 - L1, c2p - c1p
    dh = 0.0 if c1p * c2p == 0 else (h2p - h1p if abs(h2p - h1p) <= 180 else
                                     h2p - h1p - 360 if h2p - h1p > 180 else h2p - h1p + 360)
    dH = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    l_bar, cp_bar = (L1 + L2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        hp_bar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        hp_bar = (h1p + h2p) / 2
    else:
        hp_bar = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(hp_bar - 30)) + 0.24 * math.cos(math.radians(2 * hp_bar))
         + 0.32 * math.cos(math.radians(3 * hp_bar + 6)) - 0.20 * math.cos(math.radians(4 * hp_bar - 63)))
    d_theta = 30 * math.exp(-(((hp_bar - 275) / 25) ** 2))
    rc = 2 * math.sqrt(cp_bar**7 / (cp_bar**7 + 25**7))
    sl = 1 + 0.015 * (l_bar - 50) ** 2 / math.sqrt(20 + (l_bar - 50) ** 2)
    sc, sh = 1 + 0.045 * cp_bar, 1 + 0.015 * cp_bar * t
    rt = -math.sin(math.radians(2 * d_theta)) * rc
    return math.sqrt((dl / sl) ** 2 + (dc / sc) ** 2 + (dH / sh) ** 2 + rt * (dc / sc) * (dH / sh))


def seen_apart(color1, color2) -> dict[str, float]:
    """CIEDE2000 distance of two colours (anything matplotlib reads) for typical vision and under each
    simulated deficiency."""
    from matplotlib.colors import to_rgb

    first, second = (_linear(np.array(to_rgb(c))) for c in (color1, color2))
    found = {"typical": ciede2000(_lab(first), _lab(second))}
    for name, matrix in CVD.items():
        simulate = lambda rgb, m=matrix: np.clip(m @ rgb, 0, 1)  # noqa: E731
        found[name] = ciede2000(_lab(simulate(first)), _lab(simulate(second)))
    return found


def apply_style() -> None:
    """The course's matplotlib cycle: :data:`PALETTE` with a marker and a line style per series."""
    import matplotlib as mpl
    from cycler import cycler

    count = len(PALETTE)
    mpl.rcParams["axes.prop_cycle"] = (cycler(color=PALETTE) + cycler(marker=MARKERS[:count])
                                       + cycler(linestyle=list(itertools.islice(itertools.cycle(LINESTYLES), count))))
    mpl.rcParams["lines.markersize"] = 4


class Indistinct(ValueError):
    """Two series of a figure can be told apart by colour alone, and some readers cannot."""


def check_series(fig) -> None:
    """Every pair of series (lines with a label) of each axes that share marker and line style must differ in
    colour by :data:`DISTINGUISHABLE` for typical vision and under each simulated deficiency."""
    for ax in fig.axes:
        lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
        for one, other in itertools.combinations(lines, 2):
            if one.get_marker() != other.get_marker() or one.get_linestyle() != other.get_linestyle():
                continue
            distances = seen_apart(one.get_color(), other.get_color())
            worst = min(distances, key=distances.get)
            if distances[worst] < DISTINGUISHABLE:
                raise Indistinct(f"'{one.get_label()}' and '{other.get_label()}' differ only by colour, and under "
                                 f"{worst} their colours are {distances[worst]:.1f} apart (CIEDE2000; at least "
                                 f"{DISTINGUISHABLE:g} needed): give them different markers or line styles")


def figure_html(png: bytes, alt: str, caption: str, width_px: int | None = None) -> str:
    """``<figure>`` with the image, its text alternative and a visible caption."""
    size = f" width='{width_px}'" if width_px else ""
    return (f"<figure class='autograd-figure' style='margin:0'><img src='data:image/png;base64,"
            f"{base64.b64encode(png).decode()}' alt='{html.escape(alt, quote=True)}'{size} style='max-width:100%'>"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def show(fig, *, alt: str, caption: str, dpi: int = 100) -> None:
    """Show ``fig`` with its text alternative ``alt`` (what the picture shows, for someone who cannot see it) and a
    visible ``caption`` (what to take from it, in the numbers the cell computed); close it."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    if not alt.strip() or not caption.strip():
        raise ValueError("a figure needs its text alternative and its caption")
    check_series(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    png = buffer.getvalue()
    display({"text/html": figure_html(png, alt, caption), "image/png": base64.b64encode(png).decode(),
             "text/plain": f"[figure: {alt}] {caption}"}, raw=True)


def show_widget(widget, static_html: str) -> None:
    """Show ``widget`` live, and ``static_html`` wherever widgets are not drawn: an HTML export or a viewer without the
    widgets' state (nbconvert skips a widget view whose model it lacks and takes the next format). The one output
    carries both; JupyterLab's widget renderer outranks its HTML one."""
    from IPython.display import display

    bundle = dict(widget._repr_mimebundle_()) if hasattr(widget, "_repr_mimebundle_") else {}
    if "application/vnd.jupyter.widget-view+json" not in bundle:
        raise TypeError(f"{type(widget).__name__} is not a widget that has a view")
    display({**bundle, "text/html": static_html}, raw=True)


def drawn_html(draw, *args, **kwargs) -> str:
    """The HTML that ``draw(*args, **kwargs)`` displays (figures shown with :func:`show`), captured instead of shown:
    the static view of a widget that redraws a figure."""
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        draw(*args, **kwargs)
    pieces = [output.data["text/html"] for output in captured.outputs if "text/html" in output.data]
    if not pieces:
        raise ValueError(f"{getattr(draw, '__name__', draw)} displayed no HTML")
    return "".join(pieces)


def show_interactive(draw, *, also_at=(), **controls) -> None:
    """``ipywidgets.interactive(draw, **controls)`` with its sliders named for screen readers (:mod:`.sliders`), shown
    live and, where widgets are not drawn, as what ``draw`` shows at the controls' first values and then at each
    setting of ``also_at`` (dicts of control values: the ones the text suggests trying), with a line that says so."""
    import ipywidgets as widgets

    from .sliders import with_slider_names

    live = with_slider_names(widgets.interactive(draw, **controls))
    settings = ", ".join(f"{control.description} {control.value:g}" if isinstance(control.value, (int, float))
                         else f"{control.description} {control.value}" for control in live.kwargs_widgets)
    then = f", then at the {len(also_at)} settings the text suggests" if also_at else ""
    note = f"<p><em>Shown at {html.escape(settings)}{then}: run the notebook to change them.</em></p>"
    pictures = [drawn_html(draw, **{**live.kwargs, **setting}) for setting in ({}, *also_at)]
    show_widget(live, note + "".join(pictures))
