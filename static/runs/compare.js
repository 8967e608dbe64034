// The comparison page: several runs overlaid, each trace named after its run and key settings;
// one chart per series in a grid (as on the run page), or one series alone. Zooming a chart
// fetches its range again per run at a finer resolution; while any run is active the charts are
// refreshed every few seconds.
import { getJSON } from "../workbench/http.js";
import { AXIS_TITLES, ema, xRange } from "./charts.js";
import { plotlyText } from "../workbench/plotly_text.js";
import { PERCENT_AXIS, isFraction } from "../workbench/format.js";
import { paletteColour } from "../workbench/palette.js";
import { themed } from "../workbench/plotly_theme.js";

const page = JSON.parse(document.getElementById("compare-page").textContent);
const grid = document.getElementById("compare-grid");
const ACTIVE = ["queued", "waiting", "running", "interrupted", "paused"];
// Smoothing is for the series sampled every few steps, whose noise hides the trend. Validation
// series have a point per validation (a handful): an average over them would shift the curve by
// epochs. The learning rate is exact.
const SMOOTHED = new Set(["loss", "images_per_sec", "data_wait_share"]);
const view = { smoothing: Number(document.getElementById("smoothing").value), log: false };
const single = page.names.length === 1;
let runs = [];

// Time is compared as minutes since each run's first point, so runs started apart overlay.
const relative = page.x === "time";
const origin = (run) => {
  const first = Object.values(run.series_by_name).find((series) => series && series.points.time.length);
  return first ? first.points.time[0] : 0;
};
const toAxis = (run, xs) => (relative ? xs.map((t) => (t - origin(run)) / 60) : xs);
const fromAxis = (run, v) => (relative ? origin(run) + v * 60 : v);

function setState(text) {
  document.getElementById("compare-state").textContent = text;
}

// One card per series; the grid hides those no run has (a classifier has no mAP).
const charts = page.names.map((name) => {
  const card = document.createElement("section");
  card.className = "card chart-card";
  card.dataset.series = name;
  const title = document.createElement("h2");
  title.textContent = page.labels[name] || name;
  const element = document.createElement("div");
  element.className = "chart compare-chart";
  if (single) element.id = "compare-chart";
  element.setAttribute("aria-label", `${title.textContent} of the selected runs`);
  card.append(title, element);
  grid.append(card);
  return { name, card, element, zoom: null, bound: false };
});

async function load() {
  const url = new URL(page.series_url, window.location.href);
  page.runs.forEach((id) => url.searchParams.append("runs", id));
  url.searchParams.set("name", page.names.join(","));
  url.searchParams.set("x", page.x);
  runs = (await getJSON(url)).runs;
}

// The zoomed range of one run, at the server's resolution for that range.
async function loadRange(chart, run) {
  const url = new URL(`${run.url}series/`, window.location.href);
  url.searchParams.set("name", chart.name);
  url.searchParams.set("x", page.x);
  url.searchParams.set("start", fromAxis(run, chart.zoom.start));
  url.searchParams.set("end", fromAxis(run, chart.zoom.end));
  const data = await getJSON(url);
  return data.series[chart.name] || null;
}

function traces(chart, shown) {
  const out = [];
  const smoothing = SMOOTHED.has(chart.name) ? view.smoothing : 0;
  shown.forEach(({ run, series }, i) => {
    if (!series) return;
    const color = paletteColour(i);
    const x = toAxis(run, series.points[page.x]);
    const y = series.points.value;
    const type = y.length > 5000 ? "scattergl" : "scatter";
    const name = plotlyText(run.label); // the run's name: the user's text
    const mode = y.length < 40 ? "lines+markers" : "lines"; // a few validations: each one shows
    if (smoothing) {
      out.push({ type, x, y, name, legendgroup: name, showlegend: false, opacity: 0.25, line: { color, width: 1 } });
      out.push({ type, x, y: ema(y, smoothing), name, legendgroup: name, showlegend: true,
        line: { color, width: 2 } });
    } else {
      out.push({ type, mode, x, y, name, legendgroup: name, showlegend: true, line: { color, width: 2 } });
    }
  });
  return out;
}

async function draw(chart) {
  const shown = chart.zoom
    ? await Promise.all(runs.map(async (run) => ({ run, series: await loadRange(chart, run) })))
    : runs.map((run) => ({ run, series: run.series_by_name[chart.name] }));
  const xTitle = relative ? "minutes since the run's first point" : AXIS_TITLES[page.x];
  const layout = {
    margin: { t: 10, r: 20, b: 50, l: 60 },
    // Above the plot, as on the run page: below it, at a share of the plot's height, the legend of
    // three runs lay over the x axis's title.
    legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom" },
    showlegend: single || chart === charts.find((c) => !c.card.hidden), // the grid names the runs once
    hovermode: "closest",
    uirevision: "compare",
    xaxis: { title: { text: xTitle } },
    // Accuracies read as percentages, as on the run page and in the checkpoint menus.
    yaxis: {
      title: { text: page.labels[chart.name] || chart.name }, type: view.log ? "log" : "linear",
      ...(isFraction(chart.name) ? PERCENT_AXIS : {}),
    },
  };
  await window.Plotly.react(chart.element, traces(chart, shown), themed(layout), { displaylogo: false, responsive: true });
  if (!chart.bound) {
    chart.bound = true;
    chart.element.on("plotly_relayout", (change) => {
      if (change["xaxis.autorange"]) {
        if (chart.zoom) { chart.zoom = null; draw(chart); }
      } else if (xRange(change)) {
        const [start, end] = xRange(change);
        chart.zoom = { start, end };
        draw(chart);
      }
    });
  }
}

async function drawAll() {
  for (const chart of charts) {
    chart.card.hidden = !single && !runs.some((run) => run.series_by_name[chart.name]);
  }
  await Promise.all(charts.filter((chart) => !chart.card.hidden).map(draw));
  const missing = single ? runs.filter((run) => !run.series_by_name[charts[0].name]).map((run) => run.name) : [];
  const count = `${runs.length} run${runs.length === 1 ? "" : "s"}`;
  if (!single && charts.every((chart) => chart.card.hidden)) setState(`${count}, no points yet`);
  else setState(missing.length ? `no ${charts[0].name} yet for: ${missing.join(", ")}` : count);
}

async function refresh() {
  try {
    await load();
    await drawAll();
  } catch (error) {
    setState(`could not load the series: ${error.message}`);
  }
  if (runs.some((run) => ACTIVE.includes(run.state))) window.setTimeout(refresh, 5000);
}

document.getElementById("log-scale").addEventListener("change", (e) => {
  view.log = e.target.checked;
  drawAll();
});
document.getElementById("smoothing").addEventListener("input", (e) => {
  view.smoothing = Number(e.target.value);
  document.getElementById("smoothing-value").textContent = view.smoothing.toFixed(2);
  drawAll();
});

refresh();

window.comparePage = { get runs() { return runs; }, view, charts };
