"""Sliders a screen reader can name (issue 37, docs/accessibility.md).

ipywidgets draws a slider with noUiSlider, whose handle has no accessible name of its own, whatever the slider's
``description``: a screen reader says "slider" and a number. :func:`with_slider_names` adds to a box a hidden Output
holding a few lines of JavaScript (:data:`SLIDER_NAMES_JS`) that JupyterLab runs (an Output widget's outputs are
trusted, as for the stepper's live region): they give each handle in the box its slider's description as its
``aria-label``, and again whenever a slider is redrawn. Elsewhere (an HTML export, VS Code) they do nothing.
"""

from __future__ import annotations

SLIDER_NAMES_JS = """
(() => {
  const started = Date.now();
  const find = () => {
    const box = element.closest('.slider-names');
    if (!box) {
      if (Date.now() - started < 10000) setTimeout(find, 100);
      return;
    }
    const name = () => box.querySelectorAll('.widget-slider').forEach(slider => {
      const handle = slider.querySelector('.noUi-handle');
      const label = slider.querySelector('.widget-label');
      if (handle && label && label.textContent.trim()) handle.setAttribute('aria-label', label.textContent.trim());
    });
    name();
    new MutationObserver(name).observe(box, {childList: true, subtree: true});
  };
  find();
})();
"""


def with_slider_names(box):
    """``box`` (an HBox or VBox) with a hidden Output whose script names each of its sliders' handles after the
    slider's description; returns the box."""
    import ipywidgets as widgets

    namer = widgets.Output(layout=widgets.Layout(display="none"))
    namer.outputs = ({"output_type": "display_data", "metadata": {},
                      "data": {"application/javascript": SLIDER_NAMES_JS, "text/plain": ""}},)
    box.children += (namer,)
    box.add_class("slider-names")
    return box
