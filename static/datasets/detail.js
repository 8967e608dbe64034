// The dataset page: live build progress (over its websocket), the class
// histogram (Plotly), and the paged gallery read from the LMDBs.
import { getJSON } from "../workbench/http.js";
import { plotlyTexts } from "../workbench/plotly_text.js";
import { themed } from "../workbench/plotly_theme.js";
import { openSocket } from "../workbench/socket.js";
import { formatDuration, formatWhole } from "../workbench/format.js";

const root = document.getElementById("dataset");
const ACTIVE = ["pending", "building"];


function setText(id, text) {
  const el = document.getElementById(id);
  if (el) el.textContent = text;
}

function showProgress(data) {
  if (!ACTIVE.includes(data.status)) {
    window.location.reload(); // the finished page shows counts, chart, gallery
    return;
  }
  const percent = data.total ? (100 * data.done) / data.total : 0;
  const bar = document.getElementById("progress-bar");
  if (bar) {
    bar.style.width = `${percent}%`;
    bar.parentElement.setAttribute("aria-valuenow", Math.round(percent));
  }
  setText("progress-done", data.done);
  setText("progress-total", data.total);
  setText("progress-rate", (data.images_per_second || 0).toFixed(1));
  // Before the first image, the worker is still extracting the archive or listing files.
  setText("progress-eta", data.total ? formatDuration(data.eta_seconds) : "– (extracting and listing files)");
  const status = document.querySelector("#dataset-status .status");
  if (status) {
    status.textContent = data.status;
    status.className = `status status-${data.status}`;
  }
}

// The build's own socket (/ws/datasets/<id>/): the row's state on connect, then every progress
// message the build publishes. A reconnect starts with the current state again, so nothing the
// page shows is stale after the server restarts.
if (ACTIVE.includes(root.dataset.status)) {
  openSocket(root.dataset.socketPath, {
    onMessage: (event) => { if (event.type === "progress") showProgress(event); },
    onClose: () => setText("progress-eta", "(connection lost, reconnecting)"),
  });
}

function drawHistogram() {
  const holder = document.getElementById("histogram");
  const source = document.getElementById("chart-data");
  if (!holder || !source || !window.Plotly) return;
  const chart = JSON.parse(source.textContent);
  const traces = Object.entries(chart.splits).map(([split, counts]) => ({
    type: "bar", name: split, x: plotlyTexts(chart.labels), y: counts,
  }));
  window.Plotly.newPlot(holder, traces, themed({
    barmode: "stack", margin: { t: 10, r: 10, b: 60, l: 50 },
    // A detection dataset counts boxes per class, not images.
    xaxis: { type: "category", title: { text: "class" } }, yaxis: { title: { text: holder.dataset.unit || "images" } },
    legend: { orientation: "h" },
  }), { displaylogo: false, responsive: true });
}

const gallery = document.getElementById("gallery");
let page = 1;
let pages = 1;

async function loadGallery() {
  if (!gallery) return;
  const split = document.getElementById("gallery-split").value;
  const label = document.getElementById("gallery-label").value;
  const url = new URL(root.dataset.galleryUrl, window.location.href);
  url.searchParams.set("split", split);
  url.searchParams.set("page", page);
  if (label !== "") url.searchParams.set("label", label);
  setText("gallery-page", "Loading…");
  let data;
  try {
    data = await getJSON(url);
  } catch (error) {
    setText("gallery-page", `The gallery could not be read: ${error.message}`);
    return;
  }
  pages = Math.max(data.pages, 1);
  page = data.page;
  const labelNames = Array.from(document.getElementById("gallery-label").options).slice(1).map((o) => o.text);
  gallery.replaceChildren(...data.items.map((item) => {
    const figure = document.createElement("figure");
    if (item.src) {
      const img = document.createElement("img");
      img.src = item.src;
      img.alt = `${item.key}`;
      // A thumbnail opens its image at the size it is stored (and trained) at, boxes or mask drawn.
      const open = document.createElement("button");
      open.type = "button";
      open.className = "thumb";
      open.title = `${item.key}: open at its stored size`;
      open.append(img);
      open.addEventListener("click", () => openImage(split, item));
      figure.append(open);
    }
    const caption = document.createElement("figcaption");
    // Detection and segmentation items list the classes they hold (drawn on the thumbnail).
    const classes = item.classes ? (item.classes.map((i) => labelNames[i] ?? i).join(", ") || "no objects") : null;
    caption.textContent = item.error ? item.error : (classes ?? labelNames[item.label] ?? item.label);
    figure.append(caption);
    return figure;
  }));
  setText("gallery-page", `page ${page} of ${pages} (${data.total} images)`);
  // One page: no pager at all (two dead buttons read as if there were more); else only live ends.
  for (const [id, dead] of [["gallery-prev", page <= 1], ["gallery-next", page >= pages]]) {
    const button = document.getElementById(id);
    button.hidden = pages <= 1;
    button.disabled = dead;
  }
}

const viewer = document.getElementById("gallery-viewer");

async function openImage(split, item) {
  const url = new URL(root.dataset.galleryUrl, window.location.href);
  url.searchParams.set("split", split);
  url.searchParams.set("item", item.index);
  setText("gallery-viewer-caption", `${item.key}: loading…`);
  document.getElementById("gallery-viewer-image").removeAttribute("src");
  viewer.showModal();
  try {
    const data = await getJSON(url);
    if (data.src) document.getElementById("gallery-viewer-image").src = data.src;
    setText("gallery-viewer-caption", data.error || `${data.key}: ${data.width}×${data.height}, as stored`);
  } catch (error) {
    setText("gallery-viewer-caption", `${item.key}: the image could not be read: ${error.message}`);
  }
}

if (gallery) {
  document.getElementById("gallery-viewer-close").addEventListener("click", () => viewer.close());
  viewer.addEventListener("click", (event) => { if (event.target === viewer) viewer.close(); }); // outside the image
  document.getElementById("gallery-split").addEventListener("change", () => { page = 1; loadGallery(); });
  document.getElementById("gallery-label").addEventListener("change", () => { page = 1; loadGallery(); });
  document.getElementById("gallery-prev").addEventListener("click", () => { page -= 1; loadGallery(); });
  document.getElementById("gallery-next").addEventListener("click", () => { page += 1; loadGallery(); });
  loadGallery();
}
window.addEventListener("load", drawHistogram);

// Detection and segmentation: the build's label statistics (label_stats.json) as small charts:
// box width, height and aspect, objects per image, the heat map of box centres, mask class areas.
function binNames(histogram) {
  const edges = histogram.edges;
  return histogram.counts.map((_, i) => (edges[i + 1] === null ? `${edges[i]}+` : `${edges[i]}–${edges[i + 1]}`));
}

// Objects are whole: the bin [1, 2) is "1" and [3, 5) is "3–4" ("1–2" and "1+" read as one or two).
function countBinNames(histogram) {
  const edges = histogram.edges;
  return histogram.counts.map((_, i) => {
    if (edges[i + 1] === null) return `${edges[i]}+`;
    return edges[i + 1] - 1 === edges[i] ? `${edges[i]}` : `${edges[i]}–${edges[i + 1] - 1}`;
  });
}

function drawLabelStats() {
  const source = document.getElementById("label-stats-data");
  if (!source) return;
  const stats = JSON.parse(source.textContent);
  if (stats.objects_per_image) {
    const names = countBinNames(stats.objects_per_image);
    const counts = stats.objects_per_image.counts;
    setText("objects-per-image", "Images by their number of objects: " + names
      .map((name, i) => [name, counts[i]]).filter(([, n]) => n)
      .map(([name, n]) => `${formatWhole(n)} with ${name}`).join(", "));
  }
  if (!window.Plotly) return;
  // Room on the right and automargin: a long last bin label ("57.6–64"), tilted, ran past the edge.
  const layout = (x, y) => themed({
    margin: { t: 30, r: 40, b: 50, l: 50 }, height: 240,
    xaxis: { type: "category", title: { text: x }, automargin: true }, yaxis: { title: { text: y } },
  });
  const bars = (id, title, histogram, x, y = "boxes", names = binNames) => {
    const holder = document.getElementById(id);
    if (!holder || !histogram) return;
    window.Plotly.newPlot(holder, [{ type: "bar", x: names(histogram), y: histogram.counts }],
      { ...layout(x, y), title: { text: title } }, { displaylogo: false, responsive: true });
  };
  bars("stats-box-width", "Box width", stats.box_width, "pixels");
  bars("stats-box-height", "Box height", stats.box_height, "pixels");
  bars("stats-box-aspect", "Box aspect (width / height)", stats.box_aspect, "aspect");
  // Each image counted once, in the bin of its number of objects.
  bars("stats-objects", "Objects per image", stats.objects_per_image, "objects", "images", countBinNames);
  const heat = document.getElementById("stats-centres");
  if (heat && stats.box_centres) {
    window.Plotly.newPlot(heat, [{ type: "heatmap", z: stats.box_centres, autocolorscale: true }],
      themed({ margin: { t: 30, r: 10, b: 50, l: 50 }, height: 240, title: { text: "Box centres" },
        // The cells are tenths of the image: say so, or 0..9 reads as pixels.
        xaxis: { title: { text: "tenths of the width" } },
        yaxis: { autorange: "reversed", title: { text: "tenths of the height" } } }), { displaylogo: false, responsive: true });
  }
  const areas = document.getElementById("stats-areas");
  if (areas && stats.class_areas) {
    window.Plotly.newPlot(areas, [{
      type: "bar", x: plotlyTexts(stats.class_areas.map((row) => row.name)), y: stats.class_areas.map((row) => row.pixels),
    }], { ...layout("class", "pixels"), title: { text: "Mask class areas" } }, { displaylogo: false, responsive: true });
  }
}
window.addEventListener("load", drawLabelStats);
