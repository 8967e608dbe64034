// The live run page: one websocket (/ws/runs/<id>/) feeds a series store and the header; the
// charts grow with extendTraces. Protocol: send {since: last seq held}; the server answers with a
// replay, then live events. Events are applied strictly in sequence order: a duplicate is
// dropped, a gap makes the client ask for a replay (and hold live events until it comes).
import {
  CHARTS, ChartView, SERIES_TYPES, SeriesStore, WALL_TIME, formatDuration, mountCharts,
} from "./charts.js";
import { getJSON, sendJSON } from "../workbench/http.js";
import { formatClock, formatDate, formatMetric, formatPercent, formatRate, metricName } from "../workbench/format.js";
import { networkGraph } from "../inference/netgraph.js";
import { RunStream } from "./run_stream.js";
import { validationNotes } from "./validation_notes.js";

const page = JSON.parse(document.getElementById("run-page").textContent);
const FINISHED = ["done", "failed", "aborted", "pruned"]; // pruned: ended early by its search
const PENDING = ["queued", "waiting", "interrupted"];
const LOG_LINES = 500;

const $ = (id) => document.getElementById(id);
const store = new SeriesStore();
const view = { x: $("x-axis").value, smoothing: Number($("smoothing").value), log: $("log-loss").checked };
// `best`: the best checkpoint's validation ({value, epoch, weights}): each validation offers the
// weights its checkpoint holds (heldWeights) and the latest at least as good as all before it is
// kept (selectors.run_best says the same on the server, which gives the first value);
// `earlyStop`: where an early-stopped run stopped and the best it kept, from the trainer's status.
const header = {
  state: page.state, progress: null, progressAt: 0, epoch: null, earlyStop: page.early_stop,
  best: page.best ? { value: page.best.value, epoch: page.best.epoch, weights: page.best.weights } : null,
};
const averageSeries = `ema_${page.best_metric}`;
const higherIsBetter = page.best_metric_higher ?? page.best_metric === "top1";
const WEIGHTS_WORDS = { raw: "raw weights", ema: "EMA" };

// Which weights a validation's checkpoint holds, as its trainer recorded them
// (trainer.protocol.checkpoint_weights; selectors.held_at): an event written before issue 33 has
// no record, and a run with an average then held the average.
function heldWeights(event) {
  if (event.weights === "raw" || event.weights === "ema") return event.weights;
  return page.best_averages ? "ema" : "raw";
}

async function fetchRange(names, x, start, end) {
  const url = new URL(page.series_url, window.location.href);
  names.forEach((name) => url.searchParams.append("name", name));
  url.searchParams.set("x", x);
  url.searchParams.set("start", start);
  url.searchParams.set("end", end);
  const data = await getJSON(url).catch(() => null);
  if (!data) return null; // the chart keeps what it shows
  return new Map(Object.entries(data.series).map(([name, s]) => [name, s.points]));
}

// The validation chart's axis names the task's metrics (mAP, mIoU), as its title does.
function specOf(name) {
  const spec = CHARTS[name];
  if (name !== "accuracy" || !page.metric_chart) return spec;
  const { yaxis } = spec.layout;
  return { ...spec, layout: { ...spec.layout, yaxis: { ...yaxis, title: { ...yaxis.title, text: page.metric_chart.axis } } } };
}
const charts = [...document.querySelectorAll("[data-chart]")].map(
  (el) => new ChartView(el, specOf(el.dataset.chart), view, { fetchRange }),
);

// ---------------------------------------------------------------- header

function setState(state) {
  // An action button hidden while it has the focus (the run ended under Pause) hands it on.
  const focusedAction = document.activeElement?.matches?.("[data-action]") ? document.activeElement : null;
  trackElapsed(state);
  header.state = state;
  const badge = $("run-state").querySelector(".status");
  badge.textContent = state;
  badge.className = `status status-${state}`;
  $("run-header").dataset.state = state;
  const active = !FINISHED.includes(state);
  $("run-abort").hidden = !active;
  $("run-pause").hidden = !(state === "running" || PENDING.includes(state));
  $("run-resume").hidden = state !== "paused";
  $("run-delete").hidden = state === "running"; // a page loaded while queued offered it after the start
  if (state !== "running") $("run-eta").textContent = "–";
  // What the page said of the action that led here ("Run #16 is queued") is stale once it moves on.
  const stillWaiting = PENDING.includes(state) && PENDING.includes(page.state);
  if (state !== page.state && !stillWaiting) document.querySelector("main > .messages")?.remove();
  if (state !== "running") header.pausing = false;
  // Where it stands in the queue, and why it waits, only while it waits.
  $("run-queue-fact").hidden = !PENDING.includes(state);
  $("run-wait-fact").hidden = !PENDING.includes(state);
  // A run that ended streams nothing more: the page stops saying "live".
  $("log-live").textContent = FINISHED.includes(state) ? "(last lines)" : "(latest lines, live)";
  showStream();
  placeGpuCard();
  showEpoch();
  showPauseNote();
  if (focusedAction?.hidden) refocus(focusedAction);
}

// The GPU card is for runs that have GPUs: shown once GPU samples arrive or while the run holds a
// GPU or may still get one; a run on the CPU (asked for, or placed there) has none.
const gpuCard = $("gpu-card");
let heldKinds = gpuCard.dataset.held.split(" ").filter(Boolean); // the devices' kinds the page was drawn with
function placeGpuCard(devices = null) {
  if (devices !== null) heldKinds = devices.map((device) => device.kind);
  const sampled = store.names().some((name) => /^gpu\d+_/.test(name));
  const holdsGpu = heldKinds.includes("gpu");
  const onCpu = heldKinds.length > 0 && !holdsGpu;
  const mayGetGpu = !gpuCard.hasAttribute("data-cpu-only") && !onCpu && !FINISHED.includes(header.state);
  const show = sampled || holdsGpu || mayGetGpu;
  if (gpuCard.hidden === !show) return;
  gpuCard.hidden = !show;
  // Plotly sizes a chart drawn while hidden to its default width: fit it to its column now.
  const chart = gpuCard.querySelector(".chart");
  if (show && window.Plotly && chart.data) window.Plotly.Plots.resize(chart);
}

// Throughput as a number beside its chart: the mean of the latest samples.
const RECENT_SAMPLES = 10;
function recentMean(name) {
  const values = store.get(name)?.value.filter((value) => typeof value === "number").slice(-RECENT_SAMPLES) || [];
  return values.length ? values.reduce((sum, value) => sum + value, 0) / values.length : null;
}
function showThroughput() {
  const speed = recentMean("images_per_sec");
  if (speed === null) return;
  const wait = recentMean("data_wait_share");
  $("throughput-figure").textContent = `${formatRate(speed)} images/s`
    + (wait === null ? "" : ` · ${formatPercent(wait)} waiting for data`);
}

// "2.93 of 3" while it trains (the last metric's epoch); a run that is done did all its epochs,
// unless its early-stopping rule ended it: then where it stopped.
const epochText = (epoch) => String(Number(epoch.toFixed(2)));
function showEpoch() {
  const stop = header.earlyStop;
  if (stop && typeof stop.epoch === "number") {
    $("run-epoch").textContent = `stopped early at epoch ${epochText(stop.epoch)}`
      + (typeof stop.epochs === "number" ? ` of ${epochText(stop.epochs)}` : "");
    return;
  }
  const total = typeof page.epochs === "number" ? page.epochs : null;
  const epoch = header.state === "done" && total !== null ? total : header.epoch;
  if (epoch === null) return;
  $("run-epoch").textContent = total === null ? epoch.toFixed(2) : `${Number(epoch.toFixed(2))} of ${total}`;
}

function setProgress(percent) {
  // An early-stopped run shows the share of its epochs that ran, whatever else reports 100 %.
  if (header.earlyStop) percent = 100 * header.earlyStop.progress;
  const bar = $("run-progress");
  bar.setAttribute("aria-valuenow", Math.round(percent));
  bar.querySelector(".bar").style.width = `${percent}%`;
  $("run-percent").textContent = `${Math.round(percent)}%`;
}

// Elapsed: the wall time the run has spent running over all its attempts (start-up and validation
// included; the server sums its timeline), counted on here while it runs. The trainer's progress
// events time the training loop of the current attempt only: that stands in the tooltip.
const elapsed = {
  base: page.started_at === null ? null : page.elapsed_seconds, // "–" for a run that never started
  since: page.state === "running" ? Date.now() : null,
};
function elapsedNow() {
  if (elapsed.base === null) return null;
  return elapsed.base + (elapsed.since === null ? 0 : (Date.now() - elapsed.since) / 1000);
}
function trackElapsed(state) {
  const now = elapsedNow() ?? 0;
  if (state === "running" && elapsed.since === null) Object.assign(elapsed, { base: now, since: Date.now() });
  else if (state !== "running" && elapsed.since !== null) Object.assign(elapsed, { base: now, since: null });
}
function showElapsed() {
  const seconds = elapsedNow();
  if (seconds !== null) $("run-elapsed").textContent = formatDuration(seconds);
}

function tick() {
  if (header.state === "running") showElapsed();
}

function applyProgress(event) {
  header.progress = event;
  header.progressAt = Date.now();
  setProgress(event.percent);
  $("run-elapsed").title = `training loop of this attempt: ${formatDuration(event.elapsed)}`;
  $("run-eta").textContent = header.state === "running" ? formatDuration(event.eta_seconds) : "–";
}

function appendLog(lines) {
  if (!lines.length) return;
  const log = $("run-log");
  const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
  const kept = (log.textContent ? log.textContent.split("\n") : []).concat(lines).slice(-LOG_LINES);
  log.textContent = kept.join("\n");
  if (atBottom) log.scrollTop = log.scrollHeight;
}

function logLine(event) {
  const time = formatClock(event.time);
  if (event.type === "log") return `${time} ${event.level && event.level !== "info" ? `${event.level.toUpperCase()} ` : ""}${event.line}`;
  return `${time} [${event.source === "workbench" ? "run" : "trainer"}] ${event.state}${event.message ? `: ${event.message}` : ""}`;
}

function renderDetail(detail) {
  // An answer sent before the run ended must not take the page back: a finished state is final.
  setState(FINISHED.includes(header.state) ? header.state : detail.state);
  if (header.progress === null) setProgress(100 * detail.progress);
  $("run-wait").textContent = detail.wait_reason || "–";
  placeGpuCard(detail.devices);
  $("run-devices").textContent = detail.devices.length
    ? detail.devices.map((d) => `${d.host}: ${d.label}${d.simulated ? " (simulated)" : ""}`).join(", ")
    : "none held";
  const error = $("run-error");
  error.hidden = !detail.error;
  error.textContent = detail.error || "";
  const timeline = $("run-timeline");
  timeline.replaceChildren(...detail.transitions.map((t) => {
    const item = document.createElement("li");
    const at = document.createElement("time");
    at.dateTime = t.at;
    at.textContent = formatDate(t.at);
    const badge = document.createElement("span");
    badge.className = `status status-${t.to_state}`;
    badge.textContent = t.to_state;
    item.append(at, " ", badge);
    if (t.reason) {
      const reason = document.createElement("span");
      reason.className = "hint";
      reason.textContent = ` ${t.reason}`;
      item.append(reason);
    }
    return item;
  }));
}

// Pausing gives the devices away: the page says so when it is asked, and while the run is paused.
function showPauseNote() {
  const note = $("run-pause-note");
  let text = "";
  if (header.state === "paused") {
    text = "Paused: the run holds no devices; other runs may take them. Resume puts it back in the queue, "
      + "where it waits for free devices like any other run.";
  } else if (header.state === "running" && header.pausing) {
    text = `Pausing: the trainer saves a checkpoint, then gives its devices (${$("run-devices").textContent}) `
      + "back to the queue; other runs may start on them before you resume.";
  }
  note.textContent = text;
  note.hidden = !text;
}

// A run back in the queue (resumed, interrupted, or new) says where it stands there.
async function showQueuePosition() {
  if (!PENDING.includes(header.state)) {
    $("run-queue").textContent = "–";
    return;
  }
  const body = await getJSON(page.queue_url).catch(() => null);
  const row = body?.queue.find((r) => r.id === page.id);
  if (!row) return;
  const start = row.estimated_start ? `; expected to start ${formatDate(row.estimated_start)}` : "";
  $("run-queue").textContent = `position ${row.position} of ${body.queue.length}${start}`;
}

let detailTimer = null;
async function refreshDetail() {
  window.clearTimeout(detailTimer);
  try {
    const detail = await getJSON(page.api_url).catch(() => null); // the next event or timer asks again
    if (detail) renderDetail(detail);
    await showQueuePosition();
  } finally {
    // The wait reason changes without events while queued: look again every few seconds.
    if (PENDING.includes(header.state)) detailTimer = window.setTimeout(refreshDetail, 5000);
  }
}

// One action at a time: while its request is in flight every action button is disabled and the
// clicked one says what it does (a second click queued a second request, answered "not running").
const ACTION_BUTTONS = ["run-pause", "run-resume", "run-abort"].map($);
let acting = false;

function showActing(button) {
  for (const other of ACTION_BUTTONS) {
    other.disabled = acting;
    if (other.dataset.label) other.textContent = other.dataset.label;
  }
  $("run-header").setAttribute("aria-busy", String(acting));
  if (acting) {
    button.dataset.label = button.textContent;
    button.textContent = button.dataset.doing;
  }
}

// The keyboard's focus after an action: its button while it is still shown (an error, a run
// still pausing), else the action that took its place (Resume after Pause, Pause after Resume),
// else the run's heading, which names its new state. Chromium blurs a button that is disabled (as
// while its request is in flight) or hidden while it has the focus: the next key went nowhere.
function refocus(button) {
  const shown = [button, ...ACTION_BUTTONS].find((other) => !other.hidden);
  (shown || $("run-header").querySelector("h1")).focus();
}

async function act(action, button) {
  if (acting) return;
  const hadFocus = document.activeElement === button;
  const error = $("run-action-error");
  error.hidden = true;
  acting = true;
  showActing(button);
  let detail;
  try {
    detail = await sendJSON(page[`${action}_url`]);
  } catch (exc) {
    error.textContent = exc.body ? exc.message : `${action} failed (${exc.message})`;
    error.hidden = false;
    return;
  } finally {
    acting = false;
    showActing(button);
    if (hadFocus && detail === undefined) button.focus(); // refused: the error says why, beside it
  }
  header.pausing = action === "pause";
  renderDetail(detail);
  showPauseNote();
  if (hadFocus) refocus(button);
  if (action === "resume") refreshDetail(); // and look at the queue every few seconds while it waits
}

// ---------------------------------------------------------------- events

let frame = null;
function scheduleDraw() {
  if (frame !== null) return;
  frame = window.requestAnimationFrame(() => {
    frame = null;
    placeGpuCard();
    charts.forEach((chart) => chart.update(store));
    showThroughput();
  });
}

function apply(event, logs) {
  if (SERIES_TYPES.has(event.type)) {
    store.addEvent(event);
    if (event.type === "metrics" && typeof event.epoch === "number") header.epoch = event.epoch;
    if (event.type === "validation") {
      const weights = heldWeights(event);
      considerBest(event[weights === "ema" ? averageSeries : page.best_metric], event.epoch, weights);
    }
  } else if (event.type === "progress") {
    applyProgress(event);
  } else if (event.type === "log") {
    logs.push(logLine(event));
  } else if (event.type === "status") {
    logs.push(logLine(event));
    if (event.early_stopped) {
      const epochs = event.epochs ?? page.epochs;
      header.earlyStop = {
        epoch: event.stopped_epoch, epochs, metric: event.best_metric || page.best_metric,
        best: event.best, best_epoch: event.best_epoch, best_weights: event.best_weights,
        progress: epochs ? Math.min(1, event.stopped_epoch / epochs) : 1,
      };
      setProgress(100 * header.earlyStop.progress);
    }
    if (event.source === "workbench") {
      setState(event.state);
      header.detailStale = true; // devices, timeline, wait reason: fetched once per batch
    }
  }
}

// A tie keeps the later validation (trainer.early_stop.improves).
function considerBest(value, epoch, weights) {
  if (typeof value !== "number") return;
  const best = header.best;
  const better = best === null || (higherIsBetter ? value > best.value : value < best.value);
  const later = best !== null && value === best.value && !(epoch < best.epoch);
  if (better || later) header.best = { value, epoch, weights };
}

// After a downsampled replay the header's figures come from the series (min/max keep the best).
// With the better-of rule the best of all validations is the best of either series: each series
// the checkpoints may hold is considered whole.
function summarise() {
  const held = !page.best_averages ? ["raw"] : page.best_forced ? [page.best_forced] : ["raw", "ema"];
  for (const weights of held) {
    const watched = store.get(weights === "ema" ? averageSeries : page.best_metric);
    if (watched) watched.value.forEach((value, i) => considerBest(value, watched.epoch[i], weights));
  }
  const loss = store.get("loss");
  const last = loss ? loss.epoch[loss.epoch.length - 1] : null;
  if (typeof last === "number") header.epoch = last;
}

function afterApply(logs) {
  appendLog(logs);
  if (header.detailStale) {
    header.detailStale = false;
    refreshDetail();
  }
  showEpoch();
  showBest();
  scheduleDraw();
}

// One best: the kept checkpoint's, in the metric that chose it ("top-1 96.40% at epoch 8"), and
// whose weights it holds where the run keeps an average: "(EMA)" or "(raw weights)", as the
// template writes it.
function showBest() {
  const stop = header.earlyStop;
  const kept = stop && typeof stop.best === "number";
  const best = kept ? { value: stop.best, epoch: stop.best_epoch, weights: stop.best_weights } : header.best;
  if (best === null) return;
  const metric = stop ? stop.metric : page.best_metric;
  const at = typeof best.epoch === "number" ? ` at epoch ${epochText(best.epoch)}` : "";
  const whose = page.best_averages ? WEIGHTS_WORDS[best.weights] || "" : "";
  const notes = [whose, stop ? "kept" : ""].filter(Boolean).join(", ");
  $("run-best").textContent = `${metricName(metric)} ${formatMetric(metric, best.value)}${at}${notes ? ` (${notes})` : ""}`;
}

const noteValidation = validationNotes(document.getElementById("run-header"));

// What the socket is doing; "live" only while the run can still send something.
let streamText = "connecting…";
function status(text) {
  streamText = text;
  showStream();
}
function showStream() {
  const ended = FINISHED.includes(header.state);
  $("stream-state").textContent = ended ? streamText.replace(/^live ?\(?([^)]*)\)?$/, "$1") : streamText;
}

// ---------------------------------------------------------------- controls

$("x-axis").addEventListener("change", (e) => {
  view.x = e.target.value;
  charts.forEach((chart) => { chart.zoom = null; chart.redraw(store); });
});
$("log-loss").addEventListener("change", (e) => {
  view.log = e.target.checked;
  charts.forEach((chart) => chart.spec.logToggle && chart.redraw(store));
});
$("smoothing").addEventListener("input", (e) => {
  view.smoothing = Number(e.target.value);
  $("smoothing-value").textContent = view.smoothing.toFixed(2);
  charts.forEach((chart) => chart.spec.smooth && chart.redraw(store));
});
document.querySelectorAll("[data-action]").forEach((button) => {
  button.addEventListener("click", () => {
    // Abort cannot be undone: it asks first (pause and resume can be undone by each other).
    if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
    act(button.dataset.action, button);
  });
});

setState(page.state);
showElapsed();
document.querySelectorAll("#run-timeline time[datetime]").forEach((at) => { at.textContent = formatDate(at.dateTime); });
if (typeof page.eta_seconds === "number" && page.state === "running") $("run-eta").textContent = formatDuration(page.eta_seconds);
// Plotly loads while the socket brings the history; the charts mount once both are there (or
// after HISTORY_WAIT_MS without a history): drawing them empty, then again with the history,
// would do the costliest work of opening the page twice.
const HISTORY_WAIT_MS = 3000;
let historyArrived;
const historyReady = new Promise((resolve) => {
  historyArrived = resolve;
  window.setTimeout(resolve, HISTORY_WAIT_MS);
});
const stream = new RunStream(page.socket_path, {
  series(replay) {
    for (const [name, series] of Object.entries(replay.series || {})) store.merge(name, series.points, replay.since, series.kind);
    if (replay.downsampled) summarise();
  },
  event: apply,
  live: (event) => noteValidation(event),
  applied: afterApply,
  historyArrived: () => historyArrived(),
  status,
});
stream.connect();
const plotly = document.getElementById("plotly-script");
const plotlyReady = window.Plotly
  ? Promise.resolve()
  : new Promise((resolve) => { plotly.addEventListener("load", resolve, { once: true }); });
plotlyReady.then(() => performance.mark("plotly-ready"));
Promise.all([plotlyReady, historyReady]).then(() => mountCharts(charts, store));

// The network's picture is drawn when first opened (a large network is a few hundred boxes).
const graphCard = $("network-graph");
graphCard.addEventListener("toggle", () => {
  if (graphCard.open && !graphCard.dataset.drawn) {
    graphCard.dataset.drawn = "1";
    networkGraph(graphCard)(graphCard.dataset.graphUrl);
  }
});
window.setInterval(tick, 1000);
if (PENDING.includes(page.state)) refreshDetail();

// For tests and the curious: the page's state, read-only by convention.
window.runPage = { store, charts, stream, view, WALL_TIME };
