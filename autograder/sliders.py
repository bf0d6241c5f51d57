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


def hidden_script(source: str):
    """A hidden Output widget holding the JavaScript ``source``: JupyterLab runs it when the widget is drawn (an
    Output's outputs are trusted), with ``element`` the output's node; elsewhere it does nothing. The stepper's live
    region and :func:`with_slider_names` are made this way."""
    import ipywidgets as widgets

    script = widgets.Output(layout=widgets.Layout(display="none"))
    script.outputs = ({"output_type": "display_data", "metadata": {},
                       "data": {"application/javascript": source, "text/plain": ""}},)
    return script


def with_slider_names(box):
    """``box`` (an HBox or VBox) with a hidden script that names each of its sliders' handles after the slider's
    description; returns the box."""
    box.children += (hidden_script(SLIDER_NAMES_JS),)
    box.add_class("slider-names")
    return box
