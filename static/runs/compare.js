// The comparison page: one series of several runs overlaid on one chart, each trace named after
// its run and key settings. Zooming fetches the range again per run at a finer resolution;
// while any run is active the chart is refreshed every few seconds.
import { getJSON } from "../workbench/http.js";
import { AXIS_TITLES, ema, xRange } from "./charts.js";
import { plotlyText } from "../workbench/plotly_text.js";
import { PERCENT_AXIS, isFraction } from "../workbench/format.js";

const page = JSON.parse(document.getElementById("compare-page").textContent);
const chart = document.getElementById("compare-chart");
const COLORS = ["#2f6fdf", "#e4572e", "#1f8a4c", "#9c4dcc", "#b7791f", "#17a2b8", "#c23b32", "#5c6675",
  "#e83e8c", "#6f42c1", "#20c997", "#fd7e14"];
const ACTIVE = ["queued", "waiting", "running", "interrupted", "paused"];
const view = { smoothing: Number(document.getElementById("smoothing").value), log: false };
let runs = [];
let zoom = null; // {start, end} in the chart's x units, or null

// Time is compared as minutes since each run's first point, so runs started apart overlay.
const relative = page.x === "time";
const origin = (run) => (run.series && run.series.points.time.length ? run.series.points.time[0] : 0);
const toAxis = (run, xs) => (relative ? xs.map((t) => (t - origin(run)) / 60) : xs);
const fromAxis = (run, v) => (relative ? origin(run) + v * 60 : v);

function setState(text) {
  document.getElementById("compare-state").textContent = text;
}

async function load() {
  const url = new URL(page.series_url, window.location.href);
  page.runs.forEach((id) => url.searchParams.append("runs", id));
  url.searchParams.set("name", page.name);
  url.searchParams.set("x", page.x);
  const data = await getJSON(url);
  runs = data.runs;
  return runs;
}

// The zoomed range of one run, at the server's resolution for that range.
async function loadRange(run) {
  const url = new URL(`${run.url}series/`, window.location.href);
  url.searchParams.set("name", page.name);
  url.searchParams.set("x", page.x);
  url.searchParams.set("start", fromAxis(run, zoom.start));
  url.searchParams.set("end", fromAxis(run, zoom.end));
  const data = await getJSON(url);
  return data.series[page.name] || null;
}

function traces(shown) {
  const out = [];
  shown.forEach(({ run, series }, i) => {
    if (!series) return;
    const color = COLORS[i % COLORS.length];
    const x = toAxis(run, series.points[page.x]);
    const y = series.points.value;
    const type = y.length > 5000 ? "scattergl" : "scatter";
    const name = plotlyText(run.label); // the run's name: the user's text
    if (view.smoothing) {
      out.push({ type, x, y, name, legendgroup: name, showlegend: false, opacity: 0.25, line: { color, width: 1 } });
      out.push({ type, x, y: ema(y, view.smoothing), name, legendgroup: name, showlegend: true,
        line: { color, width: 2 } });
    } else {
      out.push({ type, x, y, name, legendgroup: name, showlegend: true, line: { color, width: 2 } });
    }
  });
  return out;
}

async function draw() {
  const shown = zoom
    ? await Promise.all(runs.map(async (run) => ({ run, series: await loadRange(run) })))
    : runs.map((run) => ({ run, series: run.series }));
  const missing = runs.filter((run) => !run.series).map((run) => run.name);
  const xTitle = relative ? "minutes since the run's first point" : AXIS_TITLES[page.x];
  const layout = {
    margin: { t: 10, r: 20, b: 50, l: 60 },
    legend: { orientation: "h", y: -0.18 },
    hovermode: "closest",
    uirevision: "compare",
    xaxis: { title: { text: xTitle } },
    // Accuracies read as percentages, as on the run page and in the checkpoint menus.
    yaxis: {
      title: { text: page.labels[page.name] || page.name }, type: view.log ? "log" : "linear",
      ...(isFraction(page.name) ? PERCENT_AXIS : {}),
    },
  };
  window.Plotly.react(chart, traces(shown), layout, { displaylogo: false, responsive: true });
  setState(missing.length ? `no ${page.name} yet for: ${missing.join(", ")}` : `${runs.length} run${runs.length === 1 ? "" : "s"}`);
}

async function refresh() {
  try {
    await load();
    await draw();
  } catch (error) {
    setState(`could not load the series: ${error.message}`);
  }
  if (runs.some((run) => ACTIVE.includes(run.state))) window.setTimeout(refresh, 5000);
}

document.getElementById("log-scale").addEventListener("change", (e) => {
  view.log = e.target.checked;
  draw();
});
document.getElementById("smoothing").addEventListener("input", (e) => {
  view.smoothing = Number(e.target.value);
  document.getElementById("smoothing-value").textContent = view.smoothing.toFixed(2);
  draw();
});

refresh().then(() => {
  if (!chart.on) return; // nothing was drawn (the error is shown)
  chart.on("plotly_relayout", (change) => {
    if (change["xaxis.autorange"]) {
      if (zoom) { zoom = null; draw(); }
    } else if (xRange(change)) {
      const [start, end] = xRange(change);
      zoom = { start, end };
      draw();
    }
  });
});

window.comparePage = { get runs() { return runs; }, view };
