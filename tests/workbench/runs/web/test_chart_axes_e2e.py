"""The run charts in Chromium: a log-scale axis reads whole values (0.1 0.2 0.5 1 2), not a digit
per minor tick, and the legend stays clear of the x axis title."""

from __future__ import annotations

import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DRAW = """async () => {
  const { CHARTS, ChartView, SeriesStore } = await import('/static/runs/charts.js');
  const el = document.createElement('div');
  el.style.width = '600px'; el.style.height = '320px';
  document.body.append(el);
  const view = new ChartView(el, CHARTS.loss, { x: 'step', smoothing: 0, log: true });
  // The series go through a store and the view's bindings, as on the run page: a view bound to
  // nothing draws 'No points yet.' without axes.
  const store = new SeriesStore();
  const step = [...Array(50).keys()];
  const points = (value) => ({ seq: step, step, epoch: step, time: step, images: step, value });
  store.merge('loss', points(step.map((i) => 2 * Math.exp(-i / 18) + 0.1)), -1, 'metrics');
  store.merge('val_loss', points(step.map((i) => 2.2 * Math.exp(-i / 20) + 0.12)), -1, 'metrics');
  view.bindings = view.bind(store);
  await Plotly.newPlot(el, view.traces(store), { ...view.layout(), height: 320 });
  const box = (selector) => el.querySelector(selector).getBoundingClientRect();
  return {
    ticks: [...el.querySelectorAll('.ytick text')].map((t) => t.textContent),
    legendBottom: box('.legend').bottom, legendTop: box('.legend').top,
    plotTop: box('.nsewdrag').top, xTitleTop: box('.xtitle').top,
  };
}"""


def test_it_reads_log_ticks_as_values_and_keeps_the_legend_off_the_axis_title(live_server_url, page, owner):
    log_in(page, live_server_url, owner.username)
    page.goto(f"{live_server_url}/")
    page.add_script_tag(url="/static/vendor/plotly.min.js")
    drawn = page.evaluate(DRAW)
    assert drawn["ticks"] and set(drawn["ticks"]) <= {"0.1", "0.2", "0.5", "1", "2"}
    assert len(drawn["ticks"]) >= 3 and "1" in drawn["ticks"]
    assert drawn["legendBottom"] <= drawn["plotTop"] + 1  # above the plot
    assert drawn["legendTop"] < drawn["xTitleTop"]
