// A classify-many or test job: follows its progress, then shows the results.
import { getJSON } from "../workbench/http.js";
import { followJob, percent, skippedNote, sortable } from "./common.js";
import { plotlyTexts } from "../workbench/plotly_text.js";
import { themed } from "../workbench/plotly_theme.js";

const card = document.getElementById("job");
const kind = card.dataset.kind;

function show(result) {
  if (!result) return;
  if (kind === "test") showTest(result); else showClassify(result);
}

// ------------------------------------------------------------------ test
function showTest(r) {
  document.getElementById("test-result").hidden = false;
  document.getElementById("metric-top1").textContent = percent(r.top1);
  document.getElementById("metric-topk-label").textContent = `Top-${r.top_k}`;
  document.getElementById("metric-top5").textContent = percent(r.top5);
  document.getElementById("metric-count").textContent = r.count;
  document.getElementById("skipped-note").textContent = skippedNote(r);
  const toggle = document.getElementById("confusion-normalised");
  const draw = () => drawConfusion(r, toggle.checked);
  toggle.addEventListener("change", draw);
  draw();
  const table = document.getElementById("per-class");
  const render = (rows) => table.tBodies[0].replaceChildren(...rows.map((c) => {
    const tr = document.createElement("tr");
    for (const value of [c.label, c.support, percent(c.precision), percent(c.recall), percent(c.f1)]) {
      const td = document.createElement("td");
      td.textContent = value;
      tr.appendChild(td);
    }
    return tr;
  }));
  render(r.per_class);
  sortable(table, () => r.per_class, render);
  const base = card.dataset.mistakes.replace(/0\.png$/, "");
  const gallery = document.getElementById("mistakes");
  if (!r.mistakes.length) gallery.innerHTML = '<p class="empty">No mistakes.</p>';
  showTopPerClass(r);
  gallery.replaceChildren(...r.mistakes.map((m) => {
    const figure = document.createElement("figure");
    const img = document.createElement("img");
    img.src = base + m.file;
    img.alt = `${m.name}: ${m.true} predicted as ${m.predicted}`;
    const caption = document.createElement("figcaption");
    caption.textContent = `${m.name}: ${m.true} → ${m.predicted} (${percent(m.confidence)})`;
    figure.append(img, caption);
    return figure;
  }));
}

// DIGITS's "Top N per category": one row of thumbnails per class (tests of this version on).
function showTopPerClass(r) {
  const classes = r.top_per_class || [];
  if (!classes.length) return;
  const base = card.dataset.top.replace(/0_0\.png$/, "");
  document.getElementById("top-per-class-card").hidden = false;
  document.getElementById("top-n").textContent = Math.max(...classes.map((c) => c.images.length));
  document.getElementById("top-per-class").replaceChildren(...classes.map((c) => {
    const row = document.createElement("div");
    row.className = "top-class";
    const title = document.createElement("h3");
    title.textContent = c.label;
    const gallery = document.createElement("div");
    gallery.className = "gallery";
    gallery.replaceChildren(...c.images.map((image) => {
      const figure = document.createElement("figure");
      const wrong = image.true !== c.label;
      if (wrong) figure.className = "wrong";
      const img = document.createElement("img");
      img.src = base + image.file;
      img.alt = `${image.name}: ${percent(image.probability)} ${c.label}${wrong ? `, really ${image.true}` : ""}`;
      const caption = document.createElement("figcaption");
      caption.textContent = `${percent(image.probability)}${wrong ? ` · really ${image.true}` : ""}`;
      figure.append(img, caption);
      return figure;
    }));
    row.append(title, gallery);
    return row;
  }));
}

function drawConfusion(r, normalised) {
  const labels = plotlyTexts(r.labels); // class names: the user's folders
  const raw = r.confusion;
  const z = normalised
    ? raw.map((row) => { const total = row.reduce((a, b) => a + b, 0); return row.map((v) => (total ? v / total : 0)); })
    : raw;
  // An empty cell says nothing (a page of "0 (0.0%)" hides the cells that matter); hover still tells.
  const text = raw.map((row, i) => row.map((v, j) => (normalised ? `${v} (${percent(z[i][j])})` : String(v))));
  const cellText = raw.map((row, i) => row.map((v, j) => (v ? text[i][j] : "")));
  Plotly.react("confusion", [{
    type: "heatmap", x: labels, y: labels, z, text: cellText, customdata: text, hoverongaps: false,
    autocolorscale: true, // the theme's sequential scale (plotly_theme.js)
    texttemplate: labels.length <= 20 ? "%{text}" : "", zmin: 0, zmax: normalised ? 1 : undefined,
    hovertemplate: "true %{y}<br>predicted %{x}<br>%{customdata}<extra></extra>",
    colorbar: { title: { text: normalised ? "share" : "images" } },
  }], themed({
    margin: { l: 90, r: 20, t: 20, b: 90 }, height: Math.min(900, Math.max(360, 34 * labels.length + 150)),
    xaxis: { title: { text: "predicted" }, type: "category" }, yaxis: { title: { text: "true" }, type: "category", autorange: "reversed" },
  }), { responsive: true, displaylogo: false });
}

// ------------------------------------------------------------------ classify many
async function showClassify(result) {
  document.getElementById("classify-result").hidden = false;
  document.getElementById("skipped-note").textContent = skippedNote(result);
  const all = (await getJSON(card.dataset.rows)).results.map((row) => ({
    path: row.path, label: row.top[0].label, probability: row.top[0].probability, top: row.top, thumb: row.thumb,
  }));
  const thumbs = card.dataset.thumbs.replace(/0\.png$/, "");
  const table = document.getElementById("rows");
  const filter = document.getElementById("rows-filter");
  let current = all;
  const render = (rows) => {
    current = rows;
    const needle = filter.value.trim().toLowerCase();
    const shown = needle ? rows.filter((r) => r.path.toLowerCase().includes(needle) || r.label.toLowerCase().includes(needle)) : rows;
    table.tBodies[0].replaceChildren(...shown.slice(0, 5000).map((row) => {
      const tr = document.createElement("tr");
      const cells = [row.path, row.label, percent(row.probability),
        row.top.map((t) => `${t.label} ${percent(t.probability)}`).join(", ")];
      for (const value of cells) {
        const td = document.createElement("td");
        td.textContent = value;
        tr.appendChild(td);
      }
      // The image beside its name: a wrong class is seen at a glance, as in DIGITS's classify-many.
      const picture = document.createElement("td");
      if (row.thumb) {
        const img = document.createElement("img");
        img.className = "thumb";
        img.loading = "lazy";
        img.src = thumbs + row.thumb;
        img.alt = row.path;
        picture.append(img);
      }
      tr.prepend(picture);
      return tr;
    }));
  };
  filter.addEventListener("input", () => render(current));
  render(all);
  sortable(table, () => current, render);
}

followJob(card, show);
