// Shared by the run page and the comparison page: a store of series built from neutral events,
// EMA smoothing, and Plotly charts that grow in place with extendTraces.
//
// A series point carries all four x coordinates (step, epoch, time, images), so switching the
// x axis needs no request. Events arrive flat (system samples flattened by the server).
import { PERCENT_AXIS } from "../workbench/format.js";
import { paletteColour } from "../workbench/palette.js";
import { themed } from "../workbench/plotly_theme.js";

export const X_AXES = ["step", "epoch", "time", "images"];
export const SERIES_TYPES = new Set(["metrics", "validation", "system"]);
const COORDINATES = new Set(["seq", "type", "time", "step", "epoch", "images_seen", "source"]);
// A live series that grows past COMPACT_AT points is re-bucketed to COMPACT_TO (min/max kept).
const COMPACT_AT = 20000;
const COMPACT_TO = 4000;
// SVG traces up to this many points; WebGL (scattergl) beyond.
const GL_THRESHOLD = 5000;
// Markers on a series (validation points) only while they are few enough to tell apart: a
// marker is an SVG element each, and 1,000 of them took longer to draw than all the lines.
const MARKERS_UP_TO = 200;

const isNumber = (v) => typeof v === "number" && Number.isFinite(v);

// The series of one event: its numeric fields. The server sends system samples already flat
// (workbench/runs/series.py `flatten`, the one home of that rule), so nothing is unpacked here.
function seriesValues(event) {
  return Object.entries(event).filter(([key, value]) => !COORDINATES.has(key) && isNumber(value));
}

// A system sample stored before the run's first metric has no step or epoch (the sampler now
// writes 0 there; older runs kept none): it belongs at the start of the run, not off the chart.
function atStart(event) {
  if (typeof event.step === "number") return event;
  return { ...event, step: 0, epoch: event.epoch ?? 0, images_seen: event.images_seen ?? 0 };
}

function emptyColumns() {
  return { seq: [], step: [], epoch: [], time: [], images: [], value: [] };
}

// Indices of at most `points` values: first, last, and each bucket's min and max.
export function minmaxIndices(values, points) {
  const n = values.length;
  if (n <= points) return values.map((_, i) => i);
  const buckets = Math.max(1, Math.floor((points - 2) / 2));
  const size = Math.ceil(n / buckets);
  const keep = new Set([0, n - 1]);
  for (let start = 0; start < n; start += size) {
    let lo = start;
    let hi = start;
    for (let i = start; i < Math.min(n, start + size); i += 1) {
      if (values[i] < values[lo]) lo = i;
      if (values[i] > values[hi]) hi = i;
    }
    keep.add(lo);
    keep.add(hi);
  }
  return [...keep].sort((a, b) => a - b);
}

export class SeriesStore {
  constructor() {
    this.series = new Map();
    // Bumped when a series is replaced (replay, compaction): charts then redraw it whole.
    this.versions = new Map();
    this.imagesPerStep = null;
  }

  names() { return [...this.series.keys()]; }

  get(name) { return this.series.get(name); }

  version(name) { return this.versions.get(name) || 0; }

  addEvent(rawEvent) {
    const event = rawEvent.type === "system" ? atStart(rawEvent) : rawEvent;
    let images = event.images_seen;
    if (event.type === "metrics" && isNumber(images) && event.step) this.imagesPerStep = images / event.step;
    if (!isNumber(images) && isNumber(event.step) && this.imagesPerStep !== null) images = event.step * this.imagesPerStep;
    for (const [name, value] of seriesValues(event)) {
      let columns = this.series.get(name);
      if (!columns) {
        columns = emptyColumns();
        this.series.set(name, columns);
      }
      columns.seq.push(event.seq);
      columns.step.push(event.step ?? null);
      columns.epoch.push(event.epoch ?? null);
      columns.time.push(event.time);
      columns.images.push(isNumber(images) ? images : null);
      columns.value.push(value);
      if (columns.value.length > COMPACT_AT) this.compact(name);
    }
  }

  // Points from the server (a downsampled replay): after `since` they extend what is held.
  merge(name, points, since, kind) {
    const held = this.series.get(name) || emptyColumns();
    const keep = held.seq.findIndex((seq) => seq > since);
    const cut = keep === -1 ? held.seq.length : keep;
    const merged = {};
    for (const key of Object.keys(held)) merged[key] = held[key].slice(0, cut).concat(points[key] || []);
    if (kind === "system") {
      merged.step.forEach((step, i) => {
        if (step !== null) return;
        merged.step[i] = 0;
        merged.epoch[i] ??= 0;
        merged.images[i] ??= 0;
      });
    }
    this.series.set(name, merged);
    this.versions.set(name, this.version(name) + 1);
    // Live validation events carry only the step: their images come from the metrics' ratio.
    const last = merged.step.length - 1;
    if (kind === "metrics" && last >= 0 && merged.step[last] && isNumber(merged.images[last])) {
      this.imagesPerStep = merged.images[last] / merged.step[last];
    }
  }

  compact(name) {
    const columns = this.series.get(name);
    const kept = minmaxIndices(columns.value, COMPACT_TO);
    const compacted = {};
    for (const key of Object.keys(columns)) compacted[key] = kept.map((i) => columns[key][i]);
    this.series.set(name, compacted);
    this.versions.set(name, this.version(name) + 1);
  }
}

// Exponential moving average with TensorBoard's debiasing; `state` carries it across calls.
export function ema(values, weight, state = { last: 0, count: 0 }) {
  const out = [];
  for (const value of values) {
    if (!isNumber(value)) {
      out.push(null);
      continue;
    }
    state.last = state.last * weight + (1 - weight) * value;
    state.count += 1;
    out.push(state.last / (1 - weight ** state.count));
  }
  return out;
}

export { formatDuration } from "../workbench/format.js";

// Wall time is shown in the browser's time zone: Plotly reads numbers on a date axis as UTC.
const TZ_MS = new Date().getTimezoneOffset() * 60000;
export const WALL_TIME = {
  toAxis: (t) => (t === null ? null : t * 1000 - TZ_MS),
  fromAxis: (v) => (typeof v === "number" ? (v + TZ_MS) / 1000 : (Date.parse(`${v.replace(" ", "T")}Z`) + TZ_MS) / 1000),
};

export const AXIS_TITLES = { step: "step", epoch: "epoch", time: "wall time", images: "images seen" };

const percent = { ...PERCENT_AXIS, rangemode: "tozero" };

function gpuLabel(match) {
  const what = {
    utilization_percent: "utilisation %",
    memory_used_mb: "memory MiB",
    cpu_percent: "rank CPU % (simulated GPU)",
    rss_mb: "rank RSS MiB (simulated GPU)",
  }[match[2]];
  return `GPU ${match[1]} ${what}`;
}

// What each chart of the run page shows. A trace's `series` is a name or a RegExp over names.
export const CHARTS = {
  loss: {
    smooth: true, logToggle: true,
    traces: [
      { series: "loss", label: "train loss" },
      { series: "val_loss", label: "val loss", markers: true },
      // With a weights' average (EMA), its validation beside the raw weights' (trainer/ema.py).
      { series: "ema_val_loss", label: "val loss (EMA)", markers: true, dash: "dash" },
      // A detector's losses by part (classifier, box, objectness, RPN box), dotted under the total.
      { series: /^loss_(.+)$/, label: (match) => `${match[1].replaceAll("_", " ")} loss`, dash: "dot" },
    ],
    layout: { yaxis: { title: { text: "loss" } } },
  },
  // Each task's validation metrics (trainer/protocol.py TASK_METRICS): a run draws the ones it reports.
  accuracy: {
    traces: [
      { series: "top1", label: "top-1", markers: true },
      { series: "top5", label: "top-5", markers: true },
      { series: "ema_top1", label: "top-1 (EMA)", markers: true, dash: "dash" },
      { series: "ema_top5", label: "top-5 (EMA)", markers: true, dash: "dash" },
      { series: "map", label: "mAP@[.5:.95]", markers: true },
      { series: "map_50", label: "mAP50", markers: true },
      { series: "map_75", label: "mAP75", markers: true },
      { series: "mar_100", label: "mAR@100", markers: true },
      { series: "miou", label: "mIoU", markers: true },
      { series: "pixel_accuracy", label: "pixel accuracy", markers: true },
      { series: "dice", label: "Dice", markers: true },
    ],
    layout: { yaxis: { title: { text: "accuracy" }, ...percent, range: [0, 1] } },
  },
  lr: {
    traces: [{ series: "lr", label: "learning rate" }],
    layout: { yaxis: { title: { text: "learning rate" }, exponentformat: "e", rangemode: "tozero" } },
  },
  throughput: {
    smooth: true,
    traces: [
      { series: "images_per_sec", label: "images/s (total)" },
      { series: "images_per_sec_per_process", label: "images/s per GPU/process" },
      { series: "data_wait_share", label: "data-wait share", yaxis: "y2" },
    ],
    layout: {
      yaxis: { title: { text: "images/s" }, rangemode: "tozero" },
      yaxis2: { title: { text: "waiting for data" }, overlaying: "y", side: "right", range: [0, 1], ...PERCENT_AXIS,
        tickmode: "linear", tick0: 0, dtick: 0.25, showgrid: false },
    },
  },
  gpu: {
    smooth: true,
    traces: [
      { series: /^gpu(\d+)_(utilization_percent|cpu_percent)$/, label: gpuLabel },
      { series: /^gpu(\d+)_(memory_used_mb|rss_mb)$/, label: gpuLabel, yaxis: "y2", dash: "dot" },
    ],
    layout: {
      yaxis: { title: { text: "utilisation %" }, rangemode: "tozero" },
      yaxis2: { title: { text: "memory MiB" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false },
    },
    empty: "No GPU samples yet (the run holds no GPU, or has not started).",
  },
  host: {
    smooth: true,
    traces: [
      { series: "process_cpu_percent", label: "trainer CPU %" },
      { series: "host_cpu_percent", label: "host CPU %" },
      { series: "host_memory_percent", label: "host memory %" },
      { series: "process_rss_mb", label: "trainer RSS MiB", yaxis: "y2", dash: "dot" },
    ],
    layout: {
      yaxis: { title: { text: "%" }, rangemode: "tozero" },
      yaxis2: { title: { text: "MiB" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false },
    },
  },
};

// One Plotly chart bound to series of a store. Mounted by mountCharts (on screen first); new
// points go in with Plotly.extendTraces; a whole redraw happens only when a control changes,
// a new series appears, or the store replaced a series.
// Log axes: whole values at 1, 2 and 5 of each decade ("0.1 0.2 0.5 1 2"), not Plotly's digits
// for the minor ticks ("2 1 9 8 7 ... 0.1"). Plotly shows the ones inside the range.
const LOG_VALUES = Array.from({ length: 13 }, (_, i) => i - 6).flatMap((e) => [1, 2, 5].map((m) => Number(`${m}e${e}`)));
export const LOG_TICKS = { tickmode: "array", tickvals: LOG_VALUES, ticktext: LOG_VALUES.map((v) => String(v)) };

export class ChartView {
  constructor(element, spec, view, { fetchRange } = {}) {
    this.el = element;
    this.spec = spec;
    this.view = view; // shared {x, smoothing, log}
    this.fetchRange = fetchRange;
    this.mounted = false;
    this.bindings = [];
    this.zoom = null; // {start, end, data: Map(name -> columns)} while zoomed in
    this.gl = false;
  }

  // The series of `store` this chart shows, with their labels, in a stable order.
  bind(store) {
    const bindings = [];
    for (const trace of this.spec.traces) {
      const names = trace.series instanceof RegExp
        ? store.names().filter((n) => trace.series.test(n)).sort((a, b) => a.localeCompare(b, "en", { numeric: true }))
        : [trace.series].filter((n) => store.get(n));
      for (const name of names) {
        const match = trace.series instanceof RegExp ? trace.series.exec(name) : null;
        const label = typeof trace.label === "function" ? trace.label(match, store) : trace.label;
        bindings.push({ name, label, trace });
      }
    }
    return bindings;
  }

  smoothing() { return this.spec.smooth ? this.view.smoothing : 0; }

  // A copy, never the store's own array: Plotly keeps the arrays it is given, and the store grows.
  xOf(columns, from = 0) {
    const xs = columns[this.view.x].slice(from);
    return this.view.x === "time" ? xs.map(WALL_TIME.toAxis) : xs;
  }

  traces(store) {
    const out = [];
    const weight = this.smoothing();
    this.gl = this.bindings.some((b) => (store.get(b.name)?.value.length || 0) > GL_THRESHOLD);
    this.bindings.forEach((binding, i) => {
      const columns = (this.zoom && this.zoom.data.get(binding.name)) || store.get(binding.name);
      const color = paletteColour(i);
      const base = {
        type: this.gl ? "scattergl" : "scatter",
        // A line of one point is invisible: a single sample (a short run's) shows as a marker.
        mode: (binding.trace.markers && columns.value.length <= MARKERS_UP_TO) || columns.value.length === 1
          ? "lines+markers" : "lines",
        name: binding.label,
        yaxis: binding.trace.yaxis || "y",
        x: this.xOf(columns),
        legendgroup: binding.name,
      };
      binding.state = { last: 0, count: 0 };
      if (this.spec.smooth) {
        out.push({ ...base, y: columns.value.slice(), opacity: weight ? 0.25 : 1, showlegend: !weight,
          line: { color, width: 1, dash: binding.trace.dash } });
        out.push({ ...base, y: weight ? ema(columns.value, weight, binding.state) : [], showlegend: !!weight,
          x: weight ? base.x : [], line: { color, width: 2, dash: binding.trace.dash } });
      } else {
        out.push({ ...base, y: columns.value.slice(), line: { color, width: 2, dash: binding.trace.dash } });
      }
      binding.drawn = store.get(binding.name).value.length;
      binding.version = store.version(binding.name);
    });
    return out;
  }

  layout() {
    const xaxis = { title: { text: AXIS_TITLES[this.view.x] }, type: this.view.x === "time" ? "date" : "linear" };
    const layout = {
      margin: { t: 10, r: 60, b: 45, l: 60 },
      // Above the plot, pushing the margin as it wraps: below it, it sat on the x axis title.
      legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom" },
      hovermode: "x unified",
      uirevision: this.view.x,
      xaxis,
      ...structuredClone(this.spec.layout || {}),
    };
    layout.yaxis = { ...(layout.yaxis || {}) };
    if (this.spec.logToggle) layout.yaxis.type = this.view.log ? "log" : "linear";
    if (this.spec.logToggle && this.view.log) Object.assign(layout.yaxis, LOG_TICKS);
    if (!this.bindings.length) {
      layout.annotations = [{ text: this.spec.empty || "No points yet.", showarrow: false, xref: "paper", yref: "paper",
        x: 0.5, y: 0.5 }]; // in the theme's muted colour (plotly_theme.js)
      // No axes without points: Plotly's default ranges (-1 to 6) would read as made-up values.
      for (const axis of ["xaxis", "yaxis", "yaxis2"]) if (layout[axis]) layout[axis] = { ...layout[axis], visible: false };
    }
    return layout;
  }

  redraw(store) {
    if (!this.mounted) return;
    this.bindings = this.bind(store);
    window.Plotly.react(this.el, this.traces(store), themed(this.layout()), { displaylogo: false, responsive: true });
    if (this.bindings.length && !this.drawnWithPoints) {
      this.drawnWithPoints = true;
      performance.mark(`drawn:${this.el.dataset.chart}`); // read by bench/bench_run_page.py
    }
  }

  mount(store) {
    if (this.mounted) return;
    this.mounted = true;
    this.redraw(store);
    this.el.on("plotly_relayout", (change) => this.onRelayout(change, store));
  }

  // New points since the last draw: extendTraces, unless the chart must be redrawn whole.
  update(store) {
    if (!this.mounted) return;
    const current = this.bind(store);
    const changed = current.length !== this.bindings.length
      || current.some((b, i) => b.name !== this.bindings[i].name || store.version(b.name) !== this.bindings[i].version);
    const crossesGl = !this.gl && current.some((b) => (store.get(b.name)?.value.length || 0) > GL_THRESHOLD);
    if (changed || crossesGl) {
      this.redraw(store);
      return;
    }
    const weight = this.smoothing();
    const update = { x: [], y: [] };
    const indices = [];
    this.bindings.forEach((binding, i) => {
      const columns = store.get(binding.name);
      const fresh = columns.value.length - binding.drawn;
      const xs = fresh > 0 ? this.xOf(columns, binding.drawn) : [];
      const ys = fresh > 0 ? columns.value.slice(binding.drawn) : [];
      binding.drawn = columns.value.length;
      if (this.spec.smooth) {
        indices.push(2 * i, 2 * i + 1);
        update.x.push(xs, weight ? xs : []);
        update.y.push(ys, weight ? ema(ys, weight, binding.state) : []);
      } else {
        indices.push(i);
        update.x.push(xs);
        update.y.push(ys);
      }
    });
    if (update.x.some((xs) => xs.length)) window.Plotly.extendTraces(this.el, update, indices);
  }

  async onRelayout(change, store) {
    if (change["xaxis.autorange"]) {
      if (this.zoom) {
        this.zoom = null;
        this.redraw(store);
      }
      return;
    }
    const range = xRange(change);
    if (!range || !this.fetchRange) return;
    let [start, end] = range;
    if (this.view.x === "time") [start, end] = [WALL_TIME.fromAxis(start), WALL_TIME.fromAxis(end)];
    const names = this.bindings.map((b) => b.name);
    const data = await this.fetchRange(names, this.view.x, start, end);
    if (!data) return;
    this.zoom = { start, end, data };
    this.redraw(store);
  }
}

// The x range of a zoom: a drag reports "xaxis.range[0]"/"[1]", Plotly.relayout "xaxis.range".
export function xRange(change) {
  if (Array.isArray(change["xaxis.range"])) return change["xaxis.range"];
  if ("xaxis.range[0]" in change) return [change["xaxis.range[0]"], change["xaxis.range[1]"]];
  return null;
}

// Mounts every chart, one per frame: first those on screen, in page order (the first chart is on
// screen after one chart's drawing, not after every visible one's), then the others while the
// browser is idle, so the charts below are drawn with their data before anyone scrolls to them.
// A chart scrolled into view before its turn goes next.
export function mountCharts(charts, store) {
  const near = (chart) => {
    const box = chart.el.getBoundingClientRect();
    return box.bottom > -50 && box.top < window.innerHeight + 50;
  };
  const soon = charts.filter(near);
  const later = charts.filter((chart) => !soon.includes(chart));
  let frame = null;
  let idle = null;
  const mountNext = () => {
    frame = null;
    idle = null;
    const chart = soon.shift() || later.shift();
    if (chart) chart.mount(store); // mount() does nothing for a chart already mounted
    schedule();
  };
  const schedule = () => {
    if (frame !== null || (!soon.length && !later.length)) return;
    if (soon.length || !("requestIdleCallback" in window)) {
      if (idle !== null) window.cancelIdleCallback(idle);
      idle = null;
      frame = window.requestAnimationFrame(mountNext);
    } else if (idle === null) {
      idle = window.requestIdleCallback(mountNext, { timeout: 1000 });
    }
  };
  if ("IntersectionObserver" in window) {
    const observer = new IntersectionObserver((entries) => {
      for (const entry of entries) {
        if (!entry.isIntersecting) continue;
        observer.unobserve(entry.target);
        const at = later.findIndex((chart) => chart.el === entry.target);
        if (at !== -1) soon.push(...later.splice(at, 1));
      }
      schedule();
    }, { rootMargin: "50px" });
    later.forEach((chart) => observer.observe(chart.el));
  }
  schedule();
}
