"""Optuna's figures on the search page in the page's theme (issue 33), drawn in Chromium from real
Optuna figures: Optuna draws for a white page (a white plot behind its parallel coordinates, grey
axis values, trials coloured by Plotly's Blues, which starts at white), so that on the dark theme
the plot was a white block and on either theme one end of the trials vanished into the card."""

from __future__ import annotations

import json

import optuna
import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DRAW = """async (figures) => {
  const { themedFigure } = await import('/static/searches/optuna_figure.js');
  const drawn = {};
  for (const [name, figure] of Object.entries(figures)) {
    const element = document.createElement('div');
    element.style.width = '600px';
    document.body.append(element);
    const { data, layout } = themedFigure(figure);
    await Plotly.newPlot(element, data, layout);
    const colours = element._fullData.flatMap((trace) => [trace.mode === 'lines' ? trace.line.color : null,
      ...(trace.marker?.colorscale || []).map(([, colour]) => colour)]);
    drawn[name] = {
      paper: element._fullLayout.paper_bgcolor, plot: element._fullLayout.plot_bgcolor,
      marks: colours.filter((colour) => typeof colour === 'string'),
      notes: [...element.querySelectorAll('.annotation-text')].map((text) => getComputedStyle(text).fill),
    };
    element.remove();
  }
  return drawn;
}"""


def _optuna_figures() -> dict:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    study.optimize(lambda trial: trial.suggest_float("lr", 1e-4, 1e-1, log=True), n_trials=5)
    drawn = {"parallel": optuna.visualization.plot_parallel_coordinate, "slice": optuna.visualization.plot_slice}
    return {name: json.loads(draw(study).to_json()) for name, draw in drawn.items()}


def _contrast(first: str, second: str) -> float:
    def luminance(colour: str) -> float:
        channels = [int(float(part)) / 255 for part in colour[colour.index("(") + 1 : -1].split(",")[:3]]
        red, green, blue = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * red + 0.7152 * green + 0.0722 * blue

    lighter, darker = sorted((luminance(first), luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_it_draws_optunas_figures_on_the_card_with_every_trial_showing(live_server_url, page, owner, scheme):
    figures = _optuna_figures()
    page.emulate_media(color_scheme=scheme)
    log_in(page, live_server_url, owner.username)
    page.add_script_tag(url="/static/vendor/plotly.min.js")
    drawn = page.evaluate(DRAW, figures)
    for name, figure in drawn.items():
        assert figure["plot"] == figure["paper"], (name, figure)  # no white plot on the dark card
        assert figure["marks"], (name, figure)
        for mark in figure["marks"]:  # a trial's line, point or colour bar: 3:1 on the card (WCAG's graphics)
            assert _contrast(mark, figure["paper"]) >= 3, (name, mark, figure["paper"])
        for note in figure["notes"]:  # the parallel coordinates' axis values: text, 4.5:1
            assert _contrast(note, figure["paper"]) >= 4.5, (name, note, figure["paper"])
    assert drawn["parallel"]["notes"], drawn
