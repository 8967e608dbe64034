// New run: dataset facts, network table (parameters and fit from the server), the custom network
// editor with live shapes, the live learning-rate preview, the live devices table and whether the
// run would start now or wait. Every check the page shows comes from the server's own code.
import { getJSON, postForm, sendJSON } from "../workbench/http.js";
import { networkGraph } from "../inference/netgraph.js";
import { augmentPreview } from "./augment_preview.js";
import { largestBatchFinder } from "./largest_batch.js";
import { schedulePreview } from "./schedule_preview.js";
import { taskFields } from "./task_fields.js";
import { searchCard } from "../searches/search_card.js";
import { formatBytes, formatCount, formatPercent } from "../workbench/format.js";

const form = document.getElementById("run-form");
const datasets = JSON.parse(document.getElementById("dataset-facts-data").textContent);
const networkInfo = JSON.parse(document.getElementById("network-info").textContent);
const chosenGpus = new Set(JSON.parse(document.getElementById("chosen-gpus").textContent) || []);
// Not form.dataset: a form's named controls shadow its properties, and one field is named "dataset".
const urls = Object.fromEntries(["lr-preview", "layer-shapes", "networks", "placement", "gpus"].map(
  (name) => [name, form.getAttribute(`data-${name}`)]));
const $ = (id) => document.getElementById(id);

function debounce(fn, ms = 300) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

function fieldBox(name) { return form.querySelector(`.field[data-field="${name}"]`); }

// Why the server refused the last submit, per field: it stays beside the field until the user
// edits that field, whatever the live previews (which check less) say in the meantime.
const refusals = {};
for (const box of form.querySelectorAll(".field-errors")) {
  const text = box.textContent.trim();
  if (text) refusals[box.id.replace(/^errors-/, "")] = text;
}

function setFieldError(name, message) {
  const box = $(`errors-${name}`);
  if (!box) return;
  const shown = message || refusals[name] || "";
  if (box.textContent.trim() !== shown) box.textContent = shown;
  const field = fieldBox(name);
  if (field) field.classList.toggle("has-error", Boolean(shown));
}

function forgetRefusal(event) {
  const name = event.target.name;
  if (!(name in refusals)) return;
  delete refusals[name];
  setFieldError(name, "");
}
form.addEventListener("input", forgetRefusal);
form.addEventListener("change", forgetRefusal);

// ------------------------------------------------------------------ dataset
function dataset() { return datasets[form.elements.dataset.value] || null; }

const task = taskFields({ form, fieldBox, $ });
const search = searchCard(form); // the search card's objective: the task's metrics

function showDataset() {
  const d = dataset();
  $("dataset-facts").textContent = d
    ? `${d.width}×${d.height}, ${d.channels === 1 ? "gray" : "colour"}, ${d.classes} classes, ${d.train} training images (${d.images} in all)`
    : "";
  if (d) task.useDataset(d); // before the previews below, which read the batch and the crop
  if (d) search.useTask(d.task);
  loadNetworks();
  refreshShapes();
  refreshLr();
}

// ------------------------------------------------------------------ networks
function network() { const c = form.querySelector("input[name=network]:checked"); return c ? c.value : "lenet"; }


// The fit's words in a box of two lines (the whole text on hover), so that an answer longer than
// the sizes it replaces does not push the rows below it down while a person aims at one of them.
function showFit(row, text) {
  const box = row.querySelector(".network-fit .fit-text");
  box.textContent = text;
  box.title = text;
}

for (const row of document.querySelectorAll("#network-table tbody tr")) {
  const info = networkInfo[row.dataset.network];
  if (info) {
    row.querySelector(".network-description").textContent = info.description;
    showFit(row, info.sizes);
  }
  row.addEventListener("click", (event) => {
    if (event.target.tagName !== "INPUT") row.querySelector("input").click();
  });
}

// The picker's filter: every word must appear in the row's name, family or description
// ("timm convnext", "vit"); the chosen network stays in view. Rows of another task stay hidden
// through their own `hidden`, the filter through a class, so neither undoes the other.
function filterNetworks() {
  const words = $("network-filter").value.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const row of document.querySelectorAll("#network-table tbody tr")) {
    const info = networkInfo[row.dataset.network] || {};
    const text = `${row.dataset.network} ${info.family || ""} ${info.description || ""}`.toLowerCase();
    const out = !words.every((word) => text.includes(word)) && row.dataset.network !== network();
    row.classList.toggle("filtered-out", out);
    if (!out && !row.hidden) shown += 1;
  }
  $("network-filter-count").textContent = words.length ? `${shown} shown` : "";
}
$("network-filter").addEventListener("input", filterNetworks);

let networksAsked = 0;

// The classic networks' fits first, then the zoo's (timm's), ZOO_CHUNK at a time: each is a build
// on the server, and a later answer for another crop size must not wait behind thirty of them.
// `asked` drops answers for an older choice and stops asking for its remaining chunks.
const ZOO_CHUNK = 4;
const zooNames = Object.keys(networkInfo).filter((name) => name.startsWith("timm/"));
async function loadNetworks(zoo = null, asked = ++networksAsked) {
  const d = dataset();
  if (!d) return;
  const table = $("network-table");
  if (!zoo) {
    showTaskRows(d.task);
    table.dataset.fits = "checking"; // rows may still move as answers fill them in
  }
  const crop = form.elements.crop_size.value;
  const unchecked = "Could not check which networks take this dataset's images";
  let body;
  try {
    body = await getJSON(`${urls.networks}?dataset=${d.id}&crop_size=${encodeURIComponent(crop)}${zoo ? `&only=${encodeURIComponent(zoo.join(","))}` : ""}`);
  } catch (error) {
    // Said, not swallowed: without the fits the table cannot tell which networks take the images.
    if (asked === networksAsked) {
      $("errors-network").textContent = `${unchecked}: ${error.message}`;
      table.dataset.fits = "failed";
    }
    return;
  }
  if (asked !== networksAsked) return; // an answer for a dataset or crop size no longer chosen
  if ($("errors-network").textContent.startsWith(unchecked)) $("errors-network").textContent = "";
  for (const row of document.querySelectorAll("#network-table tbody tr")) {
    const fit = body.networks[row.dataset.network];
    if (!fit && (zoo || row.dataset.network !== "custom")) continue; // the other answer's row
    // Another task's networks cannot train on this dataset: only its own task's rows are shown
    // (the custom network, which the server does not fit, by its task in the network info).
    row.hidden = fit ? Boolean(fit.other_task) : networkTask(row.dataset.network) !== body.task;
    if (row.hidden) {
      row.querySelector("input[name=network]").checked = false;
      continue;
    }
    if (!fit) continue;
    row.querySelector(".network-params").textContent = formatCount(fit.params);
    row.querySelector(".network-gflops").textContent = fit.gflops == null ? "–" : fit.gflops.toFixed(fit.gflops < 1 ? 3 : 1);
    showFit(row, fit.note || fit.problem || networkInfo[row.dataset.network].sizes);
    row.querySelector(".network-fit").classList.toggle("bad", Boolean(fit.problem));
    row.classList.toggle("unfit", Boolean(fit.problem));
    // A network that cannot take these images cannot be chosen; the reason stands in its row.
    const radio = row.querySelector("input[name=network]");
    radio.disabled = Boolean(fit.problem);
    row.title = fit.problem ? `Not available for this dataset: ${fit.problem}` : "";
    if (radio.disabled && radio.checked) {
      radio.checked = false;
      $("errors-network").textContent = `${radio.value} cannot take this dataset's images (${fit.problem}): choose another network.`;
      showNetwork();
    }
  }
  if (!form.querySelector("input[name=network]:checked")) {
    // The first network of the dataset's task that takes its images, when the chosen one went away.
    const first = [...form.querySelectorAll("#network-table tbody tr:not([hidden]) input[name=network]")].find((r) => !r.disabled);
    if (first) first.checked = true;
    showNetwork();
  }
  const next = zoo ? zooNames.indexOf(zoo[zoo.length - 1]) + 1 : 0;
  if (next < zooNames.length) loadNetworks(zooNames.slice(next, next + ZOO_CHUNK), asked);
  else table.dataset.fits = "done";
}

// The dataset's task is known before any fits answer: another task's rows are hidden at once, so
// the table never shows a detection dataset the classifiers while the server measures.
function networkTask(name) { return (networkInfo[name] || {}).task || "classification"; }

function showTaskRows(task) {
  for (const row of document.querySelectorAll("#network-table tbody tr")) {
    row.hidden = networkTask(row.dataset.network) !== task;
    if (row.hidden) row.querySelector("input[name=network]").checked = false;
  }
  if (!form.querySelector("input[name=network]:checked")) {
    // The task's first network until the fits say which take the images (a failed request
    // must not leave a classifier chosen on a detection dataset).
    const first = form.querySelector("#network-table tbody tr:not([hidden]) input[name=network]");
    if (first) first.checked = true;
    queueMicrotask(showNetwork); // after the module has run: showNetwork reads what is set up below
  }
}

function showNetwork() {
  for (const row of document.querySelectorAll("#network-table tbody tr")) {
    row.classList.toggle("chosen", row.dataset.network === network());
  }
  $("custom-editor").hidden = network() !== "custom";
  if (network() === "custom" && !layers.length) useTemplate();
  refreshShapes();
}

// ------------------------------------------------------------------ custom network editor
const LAYERS = {
  conv2d: { required: ["out_channels", "kernel_size"], optional: ["stride", "padding", "dilation", "groups"], defaults: { out_channels: 16, kernel_size: 3, padding: 1 } },
  linear: { required: [], optional: ["out_features"], defaults: {} },
  batch_norm: { required: [], optional: ["eps", "momentum"], defaults: {} },
  relu: { required: [], optional: [], defaults: {} },
  leaky_relu: { required: [], optional: ["negative_slope"], defaults: {} },
  gelu: { required: [], optional: [], defaults: {} },
  sigmoid: { required: [], optional: [], defaults: {} },
  tanh: { required: [], optional: [], defaults: {} },
  max_pool: { required: ["kernel_size"], optional: ["stride", "padding"], defaults: { kernel_size: 2 } },
  avg_pool: { required: ["kernel_size"], optional: ["stride", "padding"], defaults: { kernel_size: 2 } },
  adaptive_avg_pool: { required: [], optional: ["output_size"], defaults: { output_size: 1 } },
  dropout: { required: [], optional: ["p"], defaults: { p: 0.5 } },
  flatten: { required: [], optional: [], defaults: {} },
};
const TEMPLATE = [
  { type: "conv2d", out_channels: 16, kernel_size: 3, padding: 1 }, { type: "relu" }, { type: "max_pool", kernel_size: 2 },
  { type: "conv2d", out_channels: 32, kernel_size: 3, padding: 1 }, { type: "relu" }, { type: "adaptive_avg_pool", output_size: 1 },
  { type: "flatten" }, { type: "linear" },
];
let layers = [];
let shapes = [];
let badLayer = null;
try { layers = JSON.parse(form.elements.custom_layers.value || "[]"); } catch { layers = []; }

const typeSelect = $("new-layer-type");
for (const type of Object.keys(LAYERS)) typeSelect.add(new Option(type, type));

function parseValue(text) {
  const t = text.trim();
  if (t === "") return undefined;
  if (t === "true" || t === "false") return t === "true";
  const n = Number(t);
  return Number.isFinite(n) ? n : t;
}

function syncLayers() {
  form.elements.custom_layers.value = layers.length ? JSON.stringify(layers) : "";
  renderLayers();
  refreshShapes();
}

function renderLayers() {
  const body = $("layer-table").tBodies[0];
  body.replaceChildren(...layers.map((layer, i) => {
    const tr = document.createElement("tr");
    tr.classList.toggle("bad", badLayer === i);
    const spec = LAYERS[layer.type] || { required: [], optional: [] };
    const cells = [document.createElement("td"), document.createElement("td"), document.createElement("td"),
      document.createElement("td"), document.createElement("td")];
    cells[0].textContent = i;
    const select = document.createElement("select");
    for (const type of Object.keys(LAYERS)) select.add(new Option(type, type, false, type === layer.type));
    select.setAttribute("aria-label", `layer ${i} type`);
    select.addEventListener("change", () => { layers[i] = { type: select.value, ...LAYERS[select.value].defaults }; syncLayers(); });
    cells[1].appendChild(select);
    for (const name of [...spec.required, ...spec.optional]) {
      const wrap = document.createElement("label");
      wrap.className = "param";
      wrap.textContent = `${name}${spec.required.includes(name) ? "*" : ""} `;
      const input = document.createElement("input");
      input.value = layer[name] === undefined ? "" : layer[name];
      input.placeholder = layer.type === "linear" && name === "out_features" ? "classes" : "";
      input.dataset.param = name;
      input.addEventListener("input", debounce(() => {
        const value = parseValue(input.value);
        if (value === undefined) delete layers[i][name]; else layers[i][name] = value;
        form.elements.custom_layers.value = JSON.stringify(layers);
        refreshShapes();
      }, 250));
      wrap.appendChild(input);
      cells[2].appendChild(wrap);
    }
    cells[3].className = "shape";
    const shape = shapes[i + 1];
    cells[3].textContent = shape ? shape.shape.join(" × ") : (badLayer !== null && i >= badLayer ? "✗" : "…");
    const buttons = [["↑", -1], ["↓", 1]].map(([label, delta]) => {
      const b = document.createElement("button");
      b.type = "button"; b.className = "secondary"; b.textContent = label;
      b.setAttribute("aria-label", `move layer ${i} ${delta < 0 ? "up" : "down"}`);
      b.disabled = i + delta < 0 || i + delta >= layers.length;
      b.addEventListener("click", () => { [layers[i], layers[i + delta]] = [layers[i + delta], layers[i]]; syncLayers(); });
      return b;
    });
    const remove = document.createElement("button");
    remove.type = "button"; remove.className = "secondary"; remove.textContent = "✕";
    remove.setAttribute("aria-label", `remove layer ${i}`);
    remove.addEventListener("click", () => { layers.splice(i, 1); syncLayers(); });
    cells[4].append(...buttons, remove);
    tr.append(...cells);
    return tr;
  }));
}

function useTemplate() { layers = TEMPLATE.map((l) => ({ ...l })); syncLayers(); }
$("add-layer").addEventListener("click", () => { layers.push({ type: typeSelect.value, ...LAYERS[typeSelect.value].defaults }); syncLayers(); });
$("layer-template").addEventListener("click", useTemplate);

// The chosen network drawn as its graph of layers for this dataset's images (static/inference/netgraph.js).
const showGraph = networkGraph($("network-graph"));
function refreshGraph() {
  const d = dataset();
  if (!d) return;
  const params = new URLSearchParams({ network: network(), dataset: d.id, crop_size: form.elements.crop_size.value });
  if (network() === "custom") params.set("custom_layers", JSON.stringify(layers));
  showGraph(`${$("network-graph").dataset.graphUrl}?${params}`);
}

const refreshShapes = debounce(async () => {
  refreshGraph();
  const d = dataset();
  if (network() !== "custom" || !d) return;
  try {
    const body = await sendJSON(urls["layer-shapes"], {
      body: { dataset: d.id, layers, crop_size: form.elements.crop_size.value },
    });
    shapes = body.shapes; badLayer = null;
    $("layer-error").textContent = "";
    $("custom-params").textContent = `${formatCount(body.params)} parameters; input ${body.shapes[0].shape.join(" × ")}`;
  } catch (error) {
    badLayer = error.body?.index ?? null; // the server names the first layer that does not fit
    shapes = [];
    $("layer-error").textContent = error.message;
    $("custom-params").textContent = "";
  }
  renderLayers();
}, 250);

// ------------------------------------------------------------------ solver and learning-rate preview
const refreshLr = schedulePreview({ form, fieldBox, $, setFieldError, debounce, url: urls["lr-preview"] }).refresh;

// ------------------------------------------------------------------ devices
function deviceMode() { const c = form.querySelector("input[name=device_mode]:checked"); return c ? c.value : "auto"; }

function showDeviceFields() {
  fieldBox("gpu_count").hidden = deviceMode() !== "count";
  // Splitting the network needs GPUs asked for by number or by name; elsewhere it is one copy.
  const splittable = deviceMode() === "count" || deviceMode() === "specific";
  fieldBox("model_parallel").hidden = !splittable;
  if (!splittable) form.elements.model_parallel.value = "1";
  for (const box of form.querySelectorAll("input[name=gpus]")) box.disabled = deviceMode() !== "specific";
  refreshPlacement();
}

const mb = (value) => formatBytes(value * 2 ** 20); // the inventory counts MiB

async function refreshDevices() {
  try {
    const body = await getJSON(urls.gpus).catch(() => null);
    if (!body) return;
    for (const box of form.querySelectorAll("input[name=gpus]")) if (box.checked) chosenGpus.add(box.value); else chosenGpus.delete(box.value);
    const rows = [];
    for (const host of body.hosts) {
      for (const device of host.devices) {
        const tr = document.createElement("tr");
        tr.classList.toggle("busy", device.in_use);
        const value = `${host.hostname}:${device.index}`;
        const pick = document.createElement("td");
        if (device.kind === "gpu") {
          const box = document.createElement("input");
          box.type = "checkbox"; box.name = "gpus"; box.value = value;
          box.checked = chosenGpus.has(value);
          box.disabled = deviceMode() !== "specific" || !host.online;
          box.setAttribute("aria-label", `${host.hostname} GPU ${device.index}`);
          box.addEventListener("change", () => {
            if (box.checked) chosenGpus.add(value); else chosenGpus.delete(value);
            refreshPlacement();
          });
          pick.appendChild(box);
        }
        const util = device.utilization_percent === null ? "–" : formatPercent(device.utilization_percent / 100);
        const holder = device.in_use ? (device.run ? `#${device.run.id} ${device.run.name} (${device.run.owner})` : "another user's run") : "free";
        const memory = device.memory_total_mb ? `${mb(device.memory_used_mb)} / ${mb(device.memory_total_mb)}` : "–";
        const cells = [host.hostname + (host.online ? "" : " (offline)"),
          `${device.label}: ${device.name}${device.simulated ? " (simulated)" : ""}`, memory, util, holder];
        tr.appendChild(pick);
        for (const text of cells) { const td = document.createElement("td"); td.textContent = text; tr.appendChild(td); }
        rows.push(tr);
      }
    }
    const body_ = $("device-table").tBodies[0];
    if (rows.length) body_.replaceChildren(...rows);
    else body_.innerHTML = '<tr><td colspan="6" class="hint">No worker online: the run will wait in the queue until one starts.</td></tr>';
  } finally {
    setTimeout(refreshDevices, 3000);
  }
}

const refreshPlacement = debounce(async () => {
  const params = new URLSearchParams({
    device_mode: deviceMode(),
    gpu_count: form.elements.gpu_count.value || "1",
    model_parallel: form.elements.model_parallel.value || "1",
  });
  for (const value of chosenGpus) params.append("gpus", value);
  let body = null;
  let failed = null;
  try { body = await getJSON(`${urls.placement}?${params}`); } catch (error) { failed = error; }
  const box = $("placement");
  setFieldError("gpus", "");
  setFieldError("model_parallel", "");
  if (failed) {
    const errors = failed.body?.errors || { "": failed.message };
    if (errors.gpus) setFieldError("gpus", errors.gpus);
    if (errors.model_parallel) setFieldError("model_parallel", errors.model_parallel);
    box.textContent = Object.values(errors).join(" ");
    box.className = "notice wait";
    return;
  }
  box.textContent = body.message;
  box.className = `notice ${body.start_now ? "now" : "wait"}`;
}, 200);

// ------------------------------------------------------------------ start from
function showStartFields() {
  const start = form.querySelector("input[name=start_from]:checked")?.value || "scratch";
  fieldBox("previous_run").hidden = start !== "run";
  fieldBox("pretrained_file").hidden = start !== "upload";
  fieldBox("stored_weights").hidden = start !== "weights";
  // Each field's own box: the grid's display would override a hidden attribute on the grid.
  for (const name of ["freeze_backbone_epochs", "backbone_lr_mult", "freeze_bn"]) fieldBox(name).hidden = start === "scratch";
  showStoredWeights();
  const pathOption = form.querySelector("input[name=start_from][value=path]");
  if (pathOption && !form.elements.pretrained_path.value) pathOption.closest("li, div").hidden = true;
}

// The store's weights of the chosen network only ("resnet18: ImageNet-1k (torchvision IMAGENET1K_V1)").
function showStoredWeights() {
  const network = form.querySelector("input[name=network]:checked")?.value;
  const select = form.elements.stored_weights;
  for (const option of select.options) {
    option.hidden = Boolean(option.value) && !option.textContent.startsWith(`${network}: `);
  }
  if (select.selectedOptions[0]?.hidden) select.value = "";
}

// ------------------------------------------------------------------ wiring
form.elements.dataset.addEventListener("change", showDataset);
for (const radio of form.querySelectorAll("input[name=network]")) radio.addEventListener("change", showNetwork);
for (const radio of form.querySelectorAll("input[name=device_mode]")) radio.addEventListener("change", showDeviceFields);
for (const radio of form.querySelectorAll("input[name=start_from]")) radio.addEventListener("change", showStartFields);
for (const radio of form.querySelectorAll("input[name=network]")) radio.addEventListener("change", showStoredWeights);
form.elements.gpu_count.addEventListener("input", refreshPlacement);
form.elements.model_parallel.addEventListener("input", refreshPlacement);
// Fine-tuning needs the same network as the run the weights come from ("#12 name (resnet18, done)").
form.elements.previous_run.addEventListener("change", () => {
  const match = /\((\w+), \w+\)$/.exec(form.elements.previous_run.selectedOptions[0]?.textContent || "");
  const radio = match && form.querySelector(`input[name=network][value="${match[1]}"]`);
  if (radio && !radio.checked) { radio.checked = true; showNetwork(); }
});
form.elements.crop_size.addEventListener("input", debounce(() => { loadNetworks(); refreshShapes(); }, 400));

showStartFields();
renderLayers();
showNetwork();
showDataset();
showDeviceFields();
refreshDevices();
largestBatchFinder({ form, button: $("find-batch"), status: $("find-batch-status"), network, dataset });

// ------------------------------------------------------------------ recipe: presets and the augmentation preview
// A preset fills the fields it names (trainer/recipes.py, one table for the form, the API and the
// CLI); they stay editable, and the form sends what they hold, with the preset's name.
const presets = JSON.parse(document.getElementById("presets").textContent);

function showPresetSource() {
  const preset = presets[form.elements.preset.value];
  $("preset-source").textContent = preset ? `${preset.note} Source: ${preset.source}` : "";
  return preset;
}

function applyPreset() {
  const preset = showPresetSource();
  if (!preset) return;
  for (const [name, value] of Object.entries(preset.fields)) {
    const element = form.elements[name];
    if (!element) continue;
    if (element.type === "checkbox") element.checked = Boolean(value);
    else element.value = Array.isArray(value) ? value.join(", ") : String(value);
    element.dispatchEvent(new Event("change", { bubbles: true }));
  }
}
form.elements.preset.addEventListener("change", applyPreset);

augmentPreview({ form, $, setFieldError });
showPresetSource(); // a form shown again keeps its edited fields: the preset is not applied anew
