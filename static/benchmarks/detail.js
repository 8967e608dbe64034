// The benchmark page: one table per network, precision, mode and data (rows = per-GPU batch,
// columns = GPU count, cells = images/s or OOM), filled live from the benchmark's socket, and
// three Plotly charts drawn from the same cells. The server sends every cell with its speed-up.
import { getJSON } from "../workbench/http.js";
import { openSocket } from "../workbench/socket.js";
import { formatBytes, formatPercent, formatWhole } from "../workbench/format.js";
import { themed } from "../workbench/plotly_theme.js";

const page = JSON.parse(document.getElementById("benchmark-page").textContent);
const FINAL = ["done", "failed", "cancelled"];

const fmt = formatWhole;
const gib = (bytes) => (bytes ? formatBytes(bytes) : "");

function cellText(cell) {
  if (!cell) return { text: "", title: "" };
  if (cell.status === "oom") {
    return { text: "OOM", title: `needed ${gib(cell.memory_needed_bytes) || "more than the GPU holds"}: ${cell.message || ""}` };
  }
  if (cell.status !== "ok") return { text: "failed", title: cell.message || "" };
  let text = fmt(cell.images_per_sec);
  if (cell.gpus > 1 && cell.speedup != null) text += ` (${cell.speedup.toFixed(2)}x)`;
  const title = `${fmt(cell.images_per_sec_per_gpu)} images/s per GPU, step ${(1000 * cell.step_time_s).toFixed(1)} ms, ` +
    `data wait ${formatPercent(cell.data_wait_share)}, peak ${gib(cell.peak_memory_bytes)}` +
    (cell.stage_memory_bytes ? `, stages ${cell.stage_memory_bytes.map(gib).join(" / ")}` : "") +
    (cell.efficiency != null ? `, efficiency ${formatPercent(cell.efficiency)}` : "");
  return { text, title };
}

// Published numbers (the server sends those of this benchmark's image size, networks, precision
// and modes) in a row of their own, each under its GPU count, with its source.
function appendReferences(body, table) {
  const matching = (page.references || []).filter((r) => r.network === table.network &&
    r.precision === table.precision && r.mode === table.mode && table.gpus.includes(r.gpus));
  if (!matching.length) return;
  const tr = body.insertRow();
  tr.className = "reference";
  tr.insertCell().textContent = "published";
  for (const gpus of table.gpus) {
    const td = tr.insertCell();
    const reference = matching.find((r) => r.gpus === gpus);
    if (!reference) continue;
    td.dataset.referenceGpus = gpus;
    const link = document.createElement("a");
    link.href = reference.url;
    link.rel = "noopener";
    link.textContent = `${fmt(reference.images_per_sec)} (${reference.setting}, ${reference.hardware})`;
    link.title = reference.source;
    const source = document.createElement("small");
    source.textContent = ` ${reference.source}`;
    td.append(link, source);
  }
}

function tableElement(table) {
  const section = document.createElement("section");
  section.className = "card bench-table";
  const title = document.createElement("h2");
  title.textContent = `${table.network}, ${table.precision}, ${table.mode === "train" ? "forward + backward" : "forward only"}, ${table.data} data`;
  const grid = document.createElement("table");
  grid.className = "table";
  const head = grid.createTHead().insertRow();
  head.insertCell().outerHTML = "<th>batch / GPU</th>";
  for (const gpus of table.gpus) {
    const th = document.createElement("th");
    th.textContent = `${gpus} GPU${gpus > 1 ? "s" : ""}`;
    head.appendChild(th);
  }
  const body = grid.createTBody();
  for (const row of table.rows) {
    const tr = body.insertRow();
    tr.insertCell().textContent = row.batch_size;
    row.cells.forEach((cell, column) => {
      const td = tr.insertCell();
      const { text, title } = cellText(cell);
      td.textContent = text;
      td.title = title;
      td.dataset.gpus = table.gpus[column];
      td.dataset.batch = row.batch_size;
      if (cell) td.dataset.status = cell.status;
    });
  }
  appendReferences(body, table);
  section.append(title, grid);
  return section;
}

function seriesBy(cells, keyOf, x, y) {
  const traces = new Map();
  for (const cell of [...cells].sort((a, b) => a[x] - b[x])) {
    if (cell.status !== "ok" || cell[y] == null) continue;
    const key = keyOf(cell);
    if (!traces.has(key)) traces.set(key, { name: key, x: [], y: [], mode: "lines+markers", type: "scatter" });
    traces.get(key).x.push(cell[x]);
    traces.get(key).y.push(cell[y]);
  }
  return [...traces.values()];
}

function drawCharts(cells) {
  if (!window.Plotly) return;
  const label = (c) => `${c.network} ${c.precision} ${c.mode}${c.data === "dataset" ? " (dataset)" : ""}`;
  // Plotly 4 takes axis titles as {text}; ticks only at the counts and batch sizes measured (a
  // GPU count of 1.5 is not a thing).
  const axis = (title, values) => ({ title: { text: title }, ...(values ? { tickmode: "array", tickvals: values } : {}) });
  const layout = (x, y, xValues) => themed({ margin: { t: 10, r: 10 }, xaxis: axis(x, xValues), yaxis: axis(y), height: 300 });
  const options = { displaylogo: false, responsive: true };
  const counts = [...new Set(cells.map((c) => c.gpus))].sort((a, b) => a - b);
  const batches = [...new Set(cells.map((c) => c.batch_size))].sort((a, b) => a - b);
  Plotly.react("chart-scaling", seriesBy(cells, (c) => `${label(c)}, batch ${c.batch_size}`, "gpus", "images_per_sec"),
    layout("GPUs", "images/s", counts), options);
  const ideal = { name: "linear ideal", x: counts, y: counts.map((g) => g / (counts[0] || 1)), mode: "lines", line: { dash: "dot" } };
  Plotly.react("chart-speedup", [...seriesBy(cells, (c) => `${label(c)}, batch ${c.batch_size}`, "gpus", "speedup"), ideal],
    layout("GPUs", "speed-up", counts), options);
  Plotly.react("chart-batch", seriesBy(cells, (c) => `${label(c)}, ${c.gpus} GPU${c.gpus > 1 ? "s" : ""}`, "batch_size", "images_per_sec"),
    layout("batch size per GPU", "images/s", batches), options);
}

function drawTables(tables) {
  document.getElementById("tables").replaceChildren(...tables.map(tableElement));
}

function groupTables(cells) {
  const tables = new Map();
  for (const cell of cells) {
    const key = [cell.network, cell.precision, cell.mode, cell.data].join("|");
    if (!tables.has(key)) tables.set(key, { network: cell.network, precision: cell.precision, mode: cell.mode, data: cell.data, cells: [] });
    tables.get(key).cells.push(cell);
  }
  return [...tables.values()].map((t) => {
    const gpus = [...new Set(t.cells.map((c) => c.gpus))].sort((a, b) => a - b);
    const batches = [...new Set(t.cells.map((c) => c.batch_size))].sort((a, b) => a - b);
    const rows = batches.map((b) => ({ batch_size: b, cells: gpus.map((g) => t.cells.find((c) => c.gpus === g && c.batch_size === b) || null) }));
    return { ...t, gpus, rows };
  });
}

function showCells(cells) {
  drawTables(groupTables(cells));
  drawCharts(cells);
}

function showState(state) {
  document.getElementById("bench-state").textContent = state.state;
  document.getElementById("bench-progress").textContent = state.progress != null ? formatPercent(state.progress) : "";
  const reason = state.wait_reason || state.reason;
  if (reason) document.getElementById("bench-reason").textContent = reason;
  if (FINAL.includes(state.state)) document.getElementById("bench-cancel")?.closest("form")?.remove();
}

function showLargest(found) {
  if (!found?.length) return;
  document.getElementById("largest").hidden = false;
  document.getElementById("largest-list").replaceChildren(...found.map((f) => {
    const li = document.createElement("li");
    li.textContent = `${f.network} ${f.precision}, ${f.gpus} GPU${f.gpus > 1 ? "s" : ""}: ` +
      (f.batch_size ? `${f.batch_size} per GPU` : f.message || "none");
    return li;
  }));
}

function show(payload) {
  showState(payload);
  showCells(payload.cells || []);
  showLargest(payload.largest_batches);
  if (payload.devices?.length) document.getElementById("bench-devices").textContent = payload.devices.join(", ");
}

show(page);
// Reconnect while it may still change; the snapshot on reconnect fills anything missed. Once
// final, the last word is read from the API (the socket may have closed before it came).
openSocket(page.socket_path, {
  onMessage: (message) => {
    if (message.type === "snapshot") show(message);
    else if (message.kind === "cells") showCells(message.cells);
    else if (message.kind === "state") showState(message);
    else if (message.kind === "largest_batch") showLargest(message.largest_batches);
  },
  keepTrying: () => !FINAL.includes(document.getElementById("bench-state").textContent),
  onClose: (closed, { retrying }) => {
    if (!retrying) getJSON(`/api/benchmarks/${page.id}/`).then(show).catch(() => {});
  },
});
