// A detector's or segmentation network's job: detect-many and segment-many results, or a test
// (per-class AP or IoU table, precision-recall curves, the worst images first).
import { getJSON } from "../workbench/http.js";
import { formatWhole } from "../workbench/format.js";
import { followJob, percent, skippedNote, sortable } from "./common.js";
import { plotlyText } from "../workbench/plotly_text.js";
import { themed } from "../workbench/plotly_theme.js";

const card = document.getElementById("job");

function cells(tr, values) {
  for (const value of values) {
    const td = document.createElement("td");
    if (value instanceof Node) td.appendChild(value); else td.textContent = value;
    tr.appendChild(td);
  }
  return tr;
}

function header(table, columns) {
  table.tHead.rows[0].replaceChildren(...columns.map(([key, name, type]) => {
    const th = document.createElement("th");
    th.textContent = name;
    if (key) th.dataset.key = key;
    if (type) th.dataset.type = type;
    return th;
  }));
}

function legend(list, entries) {
  list.replaceChildren(...(entries || []).map((c) => {
    const item = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = c.color;
    item.append(swatch, document.createTextNode(c.label));
    return item;
  }));
}

const orNone = (value) => (value === null || value === undefined ? "–" : percent(value));

// ------------------------------------------------------------------ test
// What the run's task measures and how the page names it: the task's row (workbench/core/
// task_table.py test_page), which also titled the results and the worst images' gallery.
const report = JSON.parse(document.getElementById("test-page")?.textContent || "null");

function showTest(r) {
  document.getElementById("test-result").hidden = false;
  const metrics = report.headline.map(([key, name]) => [name, r[key]]);
  document.getElementById("test-metrics").replaceChildren(...[...metrics.map(([n, v]) => [n, percent(v)]),
    ["Images", formatWhole(r.count)]].map(([name, value]) => {
    const box = document.createElement("div");
    box.className = "metric";
    const b = document.createElement("b");
    b.textContent = value;
    box.append(document.createTextNode(name), b);
    return box;
  }));
  document.getElementById("test-notes").textContent = (r.notes || []).join(" ");
  const table = document.getElementById("per-class");
  const [countKey, countName] = report.count;
  const columns = [["label", "Class"], [countKey, countName, "number"],
    ...report.per_class.map(([key, name]) => [key, name, "number"])];
  header(table, columns);
  const render = (rows) => table.tBodies[0].replaceChildren(...rows.map((c) => cells(document.createElement("tr"),
    columns.map(([key], i) => (i === 0 ? c[key] : key === countKey ? formatWhole(c[key]) : orNone(c[key]))))));
  render(r.per_class);
  sortable(table, () => r.per_class, render);
  legend(document.getElementById("test-legend"), r.legend);
  if (report.curves) drawCurves(r.pr_curves || []);
  const [worstKey, worstName] = report.worst;
  const base = card.dataset.worst.replace(/0\.png$/, "");
  const gallery = document.getElementById("worst");
  if (!r.worst.length) gallery.innerHTML = '<p class="empty">No image to judge by.</p>';
  else gallery.replaceChildren(...r.worst.map((w) => {
    const figure = document.createElement("figure");
    const img = document.createElement("img");
    img.className = "pair";
    img.src = base + w.file;
    const score = `${worstName} ${percent(w[worstKey])}`;
    img.alt = `${w.name}: ground truth and prediction, ${score}`;
    const caption = document.createElement("figcaption");
    caption.textContent = `${w.name}: ${score}`;
    figure.append(img, caption);
    return figure;
  }));
}

function drawCurves(curves) {
  if (!curves.length) return;
  document.getElementById("pr-card").hidden = false;
  Plotly.react("pr-curves", curves.map((c) => ({
    type: "scatter", mode: "lines", name: plotlyText(c.label), x: c.recall, y: c.precision, line: { shape: "hv" },
  })), themed({
    margin: { l: 60, r: 20, t: 20, b: 50 }, height: 380,
    xaxis: { title: { text: "recall" }, range: [0, 1] }, yaxis: { title: { text: "precision" }, range: [0, 1.02] },
  }), { responsive: true, displaylogo: false });
}

// ------------------------------------------------------------------ many images
async function showMany(result) {
  document.getElementById("many-result").hidden = false;
  document.getElementById("skipped-note").textContent = skippedNote(result);
  const rows = (await getJSON(card.dataset.rows)).results;
  const table = document.getElementById("rows");
  if (card.dataset.kind === "detect") {
    document.getElementById("many-summary").textContent =
      `${result.boxes} boxes scored ${result.min_score} or more in ${result.count} images`;
    header(table, [["", "Image"], ["", "Boxes"], ["", "Best boxes"]]);
    table.tBodies[0].replaceChildren(...rows.slice(0, 5000).map((row) => cells(document.createElement("tr"), [
      row.path, row.boxes.length,
      row.boxes.slice(0, 5).map((b) => `${b.label} ${percent(b.score)}`).join(", "),
    ])));
    return;
  }
  legend(document.getElementById("many-legend"), result.legend);
  header(table, [["", "Image"], ["", "Mask"], ["", "Classes"]]);
  const base = card.dataset.masks.replace(/0\.png$/, "");
  table.tBodies[0].replaceChildren(...rows.slice(0, 2000).map((row) => {
    const img = document.createElement("img");
    img.className = "mask";
    img.src = base + row.mask;
    img.alt = `the classes of ${row.path}`;
    const shares = Object.entries(row.shares).sort((a, b) => b[1] - a[1]).map(([l, s]) => `${l} ${percent(s)}`);
    return cells(document.createElement("tr"), [row.path, img, shares.join(", ")]);
  }));
}

followJob(card, (result) => (card.dataset.kind === "test" ? showTest(result) : showMany(result)));
