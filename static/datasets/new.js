// The "New dataset" wizard: steps, archive upload with progress, resize preview, summary.
// Without JavaScript the form still works (all steps shown, server paths only).
import { getJSON, postForm, sendJSON, sendWithProgress } from "../workbench/http.js";
import { formatBytes, formatWhole } from "../workbench/format.js";

const form = document.getElementById("dataset-wizard");
form.classList.add("js");
const steps = Array.from(form.querySelectorAll(".step"));
const labels = Array.from(document.querySelectorAll(".wizard-steps li"));
const nav = form.querySelector(".wizard-nav");
const back = document.getElementById("wizard-back");
const next = document.getElementById("wizard-next");
const uploadField = form.querySelector("input[name=upload]");
const sourcePath = form.querySelector("[name=source_path]");
let current = 0;

function sourceChoice() {
  return form.querySelector("input[name=source_choice]:checked").value;
}

function showSourceChoice() {
  const choice = sourceChoice();
  form.querySelectorAll("[data-source]").forEach((el) => { el.hidden = el.dataset.source !== choice; });
}

// `focus`: Next and Back move the keyboard's focus to the heading of the step they open, whose
// fields follow it in the tab order. On the last step Next is hidden, and a hidden button loses
// the focus: the next Tab started again at the top of the page.
function show(index, { focus = false } = {}) {
  current = Math.max(0, Math.min(index, steps.length - 1));
  steps.forEach((step, i) => step.classList.toggle("current", i === current));
  labels.forEach((li, i) => {
    li.classList.toggle("current", i === current);
    li.classList.toggle("done", i < current);
  });
  nav.hidden = false;
  back.hidden = current === 0; // nothing before the first step: no Back there, not a Back that does nothing
  next.hidden = current === steps.length - 1;
  next.disabled = false;
  const name = steps[current].dataset.step;
  if (name === "options") proposeOptions();
  if (name === "preview") loadPreview();
  if (name === "confirm") fillSummary();
  if (focus) steps[current].querySelector("h2").focus();
}

// Next is disabled while it waits for the server, and Chromium takes the focus from a disabled
// button: the keyboard's next key went to the page. It gets the focus back if it had it.
async function whileNextWaits(promise) {
  const hadFocus = document.activeElement === next;
  next.disabled = true;
  try {
    return await promise;
  } finally {
    next.disabled = false;
    if (hadFocus && document.activeElement === document.body) next.focus();
  }
}

function sourceReady() {
  if (sourceChoice() === "upload") return Boolean(uploadField.value);
  return Boolean(sourcePath.value.trim());
}

// Why the source cannot be built (empty, one class, not an archive), as the server's preview
// says it; "" when the source is fine or the preview failed for another reason (the later steps
// say so). Errors of the option fields belong to the next step, not to the source.
const SOURCE_FIELDS = ["__all__", "upload", "source_path", "source_kind", "labels_file"];
async function sourceRefusal() {
  try {
    offerResizeModes((await postForm(form.dataset.previewUrl, new FormData(form))).task);
    return "";
  } catch (err) {
    const errors = err.body?.errors || {};
    if (err.body?.task) offerResizeModes(err.body.task); // known even when the mode was refused
    return SOURCE_FIELDS.flatMap((field) => errors[field] || []).join(" ");
  }
}

// The resize modes the source's task takes, from the validator's one rule (the page's
// "resize-modes" data): a mode the form would refuse is not offered, and one already chosen
// is replaced with a word, instead of a refused submit that reopened the first step.
const RESIZE_MODES = JSON.parse(document.getElementById("resize-modes").textContent);
let sourceTask = null; // the task the server read from the source (or was given)
function offerResizeModes(task) {
  if (task) sourceTask = task;
  const chosen = form.elements.task.value;
  const modes = RESIZE_MODES[chosen === "auto" ? sourceTask : chosen];
  const select = form.elements.resize_mode;
  if (!modes) return;
  for (const option of select.options) {
    option.hidden = option.disabled = !modes.includes(option.value);
  }
  const note = document.getElementById("resize-mode-note");
  note.hidden = modes.length === select.options.length;
  note.textContent = `${chosen === "auto" ? sourceTask : chosen} takes ${modes.join(" or ")}: `
    + "these move boxes and masks with their image.";
  if (!modes.includes(select.value)) {
    note.textContent = `${select.options[select.selectedIndex].text} is not offered here; ${note.textContent}`;
    select.value = modes[0];
  }
}
form.elements.task.addEventListener("change", () => offerResizeModes(null));

let uploadRefused = "";
next.addEventListener("click", async () => {
  if (steps[current].dataset.step === "options" && proposing) {
    // The size proposed from the images is still on its way: the preview waits for it, rather
    // than showing (and the build keeping) the default 256x256 it replaces a moment later.
    const note = document.getElementById("options-proposal");
    const [before, reading] = [[note.textContent, note.hidden], "Reading your images' size…"];
    [note.textContent, note.hidden] = [reading, false];
    await whileNextWaits(proposing);
    if (note.textContent === reading) [note.textContent, note.hidden] = before; // no proposal came
  }
  if (steps[current].dataset.step === "source") {
    if (!sourceReady()) {
      // A refused upload keeps its reason; otherwise say what is missing.
      setText("upload-status", uploadRefused || (sourceChoice() === "upload"
        ? "Choose an archive and wait for the upload to finish." : ""));
      if (sourceChoice() === "server") sourcePath.focus();
      return;
    }
    // Refused here, at the first step that knows, rather than after the options.
    const refusal = await whileNextWaits(sourceRefusal());
    if (refusal) {
      setText("upload-status", `This source cannot make a dataset: ${refusal}`);
      return;
    }
  }
  show(current + 1, { focus: true });
});
back.addEventListener("click", () => show(current - 1, { focus: true }));

form.querySelectorAll("input[name=source_choice]").forEach((radio) => {
  radio.addEventListener("change", () => {
    if (sourceChoice() === "server") uploadField.value = "";
    else sourcePath.value = "";
    showSourceChoice();
  });
});

function setText(id, text) {
  const el = document.getElementById(id);
  if (el) el.textContent = text;
}

// Archive upload, in chunks: each chunk is one small request (no server process ever holds a
// whole archive in memory), XHR so the browser reports progress, retried and resumable.
const fileInput = document.getElementById("archive-file");
const bar = document.getElementById("upload-progress");

function sendChunk(url, blob, offset, onProgress) {
  return sendWithProgress(url, {
    method: "PUT", body: blob, onProgress,
    headers: { "Content-Type": "application/octet-stream", "Upload-Offset": String(offset) },
  });
}

async function upload(file) {
  const opened = await sendJSON(form.dataset.uploadUrl, { body: { filename: file.name, size: file.size } });
  const url = `${form.dataset.uploadUrl}${opened.upload}/`;
  let offset = 0;
  let failures = 0;
  let state = opened;
  while (offset < file.size) {
    const end = Math.min(offset + opened.chunk_bytes, file.size);
    try {
      state = await sendChunk(url, file.slice(offset, end), offset, (loaded) => {
        bar.value = (100 * (offset + loaded)) / file.size;
        setText("upload-status", `Uploading ${file.name}: ${formatBytes(offset + loaded)} of ${formatBytes(file.size)}`);
      });
      offset = state.received;
      failures = 0;
    } catch (err) {
      if (err.status && err.status !== 409 && err.status < 500) throw err;
      failures += 1;
      if (failures > 5) throw err;
      // Ask the server how much it has, then resume from there.
      await new Promise((r) => window.setTimeout(r, 1000 * failures));
      const held = await getJSON(url).catch(() => null);
      if (held) offset = held.received;
    }
  }
  return state;
}

fileInput.addEventListener("change", async () => {
  const file = fileInput.files[0];
  uploadField.value = "";
  if (!file) return;
  const max = Number(form.dataset.maxUpload);
  if (file.size > max) {
    setText("upload-status", `${file.name} is ${formatBytes(file.size)}, over the upload limit of ${formatBytes(max)}.`);
    return;
  }
  bar.hidden = false;
  bar.value = 0;
  try {
    const done = await upload(file);
    uploadField.value = done.upload;
    uploadRefused = "";
    bar.value = 100;
    setText("upload-status", `Uploaded ${done.filename} (${formatBytes(done.size)}).`);
    const name = form.querySelector("[name=name]");
    if (!name.value) name.value = file.name.replace(/\.(zip|tgz|tar(\.(gz|bz2|xz))?)$/i, "");
  } catch (err) {
    bar.hidden = true;
    fileInput.value = ""; // choosing a corrected file of the same name starts a new upload
    uploadRefused = `Upload refused: ${err.message}`;
    setText("upload-status", uploadRefused);
  }
});

// The options that keep the user's images as they are (their common size, grey when they all
// are), read by the server from the images themselves; proposed until the user sets their own.
// A proposal that arrives while the user is in one of these fields waits until they leave it:
// written under their caret, it would merge with what they type ("8" typed over a proposed "8"
// read 88, and the dataset was built 88 pixels wide).
const SHAPE_FIELDS = ["image_width", "image_height", "channels"];
const shapeField = (name) => form.querySelector(`[name=${name}]`);
let shapeTouched = false;
let waitingProposal = null;
for (const name of SHAPE_FIELDS) {
  for (const type of ["input", "change"]) {
    shapeField(name).addEventListener(type, (event) => { if (event.isTrusted) shapeTouched = true; });
  }
  shapeField(name).addEventListener("focusout", () => {
    if (waitingProposal) applyProposal(waitingProposal);
  });
}

const inShapeField = () => SHAPE_FIELDS.some((name) => document.activeElement === shapeField(name));

function applyProposal(proposed) {
  waitingProposal = null;
  form.dataset.proposal = "dropped"; // what became of it, read by the wizard's browser tests
  if (shapeTouched) return;
  if (inShapeField()) { waitingProposal = proposed; form.dataset.proposal = "waiting"; return; }
  form.dataset.proposal = "applied";
  shapeField("image_width").value = proposed.width;
  shapeField("image_height").value = proposed.height;
  shapeField("channels").value = String(proposed.channels);
  const note = document.getElementById("options-proposal");
  note.textContent = `Proposed from your images: ${proposed.width}×${proposed.height}, `
    + `${proposed.channels === 1 ? "grey" : "colour"} (${proposed.same_size} of the ${proposed.sampled} images looked at `
    + "have this size). Change them to resize every image to another size.";
  note.hidden = false;
}

let proposing = null; // the proposal's request while it is on its way: Next waits for it

function proposeOptions() {
  if (shapeTouched || !sourceReady()) return;
  proposing = (async () => {
    let data = null;
    try { data = await postForm(form.dataset.previewUrl, new FormData(form)); } catch { return; } // the preview step says why
    offerResizeModes(data.task);
    if (data.proposed) applyProposal(data.proposed);
  })().finally(() => { proposing = null; });
}

// The four resize modes side by side on the previewed image; "Use" picks one for the build.
const MODE_WORDS = { squash: "squash: stretched to fit", crop: "crop: fills, edges cut", fill: "fill: fits, noise around", half_crop: "half crop: between the two" };
function showModes(data) {
  const box = document.getElementById("preview-modes-box");
  box.hidden = !data.modes;
  if (!data.modes) return;
  const mark = () => document.querySelectorAll("#preview-modes figure").forEach((figure) => {
    const chosen = figure.dataset.mode === form.elements.resize_mode.value;
    figure.classList.toggle("chosen", chosen);
    // aria-disabled, not disabled: a button disabled while it has the focus loses it (Chromium),
    // and the keyboard's next key went to the page.
    figure.querySelector("button").textContent = chosen ? "Chosen" : "Use this mode";
    figure.querySelector("button").setAttribute("aria-disabled", String(chosen));
  });
  document.getElementById("preview-modes").replaceChildren(...Object.entries(data.modes).map(([mode, url]) => {
    const figure = document.createElement("figure");
    figure.dataset.mode = mode;
    const img = document.createElement("img");
    img.src = url;
    img.alt = `Resized with ${mode}`;
    const caption = document.createElement("figcaption");
    caption.textContent = `${MODE_WORDS[mode] || mode} `;
    const use = document.createElement("button");
    use.type = "button";
    use.className = "secondary";
    use.addEventListener("click", () => {
      if (use.getAttribute("aria-disabled") === "true") return; // the chosen one
      form.elements.resize_mode.value = mode;
      form.elements.resize_mode.dispatchEvent(new Event("change", { bubbles: true }));
      document.getElementById("preview-resized").src = url;
      setText("preview-resized-caption", `${mode} → ${data.width}×${data.height}`);
      mark();
    });
    caption.append(use);
    figure.append(img, caption);
    return figure;
  }));
  mark();
}

let lastPreview = null; // what the server read from the source: the confirm step names its task

async function loadPreview() {
  const box = document.getElementById("preview");
  const errors = document.getElementById("preview-errors");
  box.hidden = true;
  errors.hidden = true;
  setText("preview-status", "Loading a preview…");
  // A source the build would refuse goes no further than this step.
  next.disabled = true;
  const body = new FormData(form);
  try {
    const data = await postForm(form.dataset.previewUrl, body);
    document.getElementById("preview-original").src = data.original;
    document.getElementById("preview-resized").src = data.resized;
    setText("preview-original-caption", `${data.file}: ${data.original_size[0]}×${data.original_size[1]}`);
    setText("preview-resized-caption", data.note || `${data.resize_mode} → ${data.width}×${data.height}`);
    offerResizeModes(data.task);
    showModes(data);
    lastPreview = data;
    showLabelCheck(data.label_check);
    const classes = Object.entries(data.classes || {});
    setText("preview-status", "One of your images, before and after resizing."
      + (classes.length ? ` ${classes.length} classes: ${classes.map(([name, n]) => `${name} (${n})`).join(", ")}.` : ""));
    box.hidden = false;
    next.disabled = false;
  } catch (err) {
    if (err.body?.task) offerResizeModes(err.body.task);
    if (err.body?.errors) {
      // One line per field: the form's own messages.
      errors.textContent = Object.entries(err.body.errors)
        .map(([field, list]) => (field === "__all__" ? "" : `${field}: `) + list.join(" ")).join("\n");
      setText("preview-status", "Fix this first (Back to change the source or the options):");
    } else {
      errors.textContent = `The preview request failed: ${err.message}`;
    }
    errors.hidden = false;
  }
}

// Detection and segmentation: the class table (rename, merge, ignore) over the label check the
// preview answers; a change goes into the form's class_map and asks the preview again.
const classMapField = document.getElementById("id_class_map");

function listItem(text) {
  const li = document.createElement("li");
  li.textContent = text;
  return li;
}

// VOC's own split (ImageSets lists) is the split: said, as the percentages are then not used.
function ownSplitWords(own) {
  if (!own) return "";
  const counts = Object.entries(own.counts).map(([split, n]) => `${split} ${formatWhole(n)}`).join(", ");
  return ` Split by the source's own lists (${own.lists.join(", ")}): ${counts}; `
    + "the validation and test percentages and the seed are not used.";
}

function showLabelCheck(check) {
  const box = document.getElementById("label-check-box");
  box.hidden = !check;
  if (!check) return;
  // `images` counts every image, those without a label file too (20 images: 19 labelled, 1 not).
  const labelled = check.images - check.images_without_labels;
  setText("label-check-summary", `${check.images} images for ${check.task}: ${labelled} with ${check.format} labels, `
    + `${check.images_without_labels} without. Counts are ${check.count_means}.${ownSplitWords(check.own_split)}`);
  setText("class-count-head", check.count_unit[0].toUpperCase() + check.count_unit.slice(1));
  // The table is drawn again after each change, while the focus is on the control Tab moved to
  // (this row's Ignore, the next row's name): the same control of the new rows takes it, or the
  // keyboard's next key went to the page.
  const tbody = document.querySelector("#class-table-editor tbody");
  const held = tbody.contains(document.activeElement) ? document.activeElement : null;
  const heldAt = held && { source: held.closest("tr").dataset.sourceClass, type: held.type };
  tbody.replaceChildren(...check.classes.map((row) => {
    const tr = document.createElement("tr");
    tr.dataset.sourceClass = row.name;
    const name = document.createElement("input");
    name.type = "text";
    name.value = row.maps_to ?? row.name;
    name.disabled = row.maps_to === null;
    name.setAttribute("aria-label", `Name of ${row.name} in the dataset`);
    const ignore = document.createElement("input");
    ignore.type = "checkbox";
    ignore.checked = row.maps_to === null;
    ignore.setAttribute("aria-label", `Ignore ${row.name}`);
    name.addEventListener("change", updateClassMap);
    ignore.addEventListener("change", () => { name.disabled = ignore.checked; updateClassMap(); });
    const cells = [row.name, String(row.count), name, ignore].map((content) => {
      const td = document.createElement("td");
      td.append(content);
      return td;
    });
    tr.append(...cells);
    return tr;
  }));
  if (heldAt) {
    const row = [...tbody.rows].find((tr) => tr.dataset.sourceClass === heldAt.source);
    row?.querySelector(`input[type=${heldAt.type}]`).focus();
  }
  // The classes the dataset gets once the table is applied: a rename or a merge changes no row
  // above, so without this line "counts follow" showed nothing following.
  const unit = check.count_unit;
  setText("class-table-result", `The dataset gets ${check.labels.length} class${check.labels.length === 1 ? "" : "es"}: `
    + `${check.labels.map((label) => `${label.name} (${formatWhole(label.count)} ${label.count === 1 ? unit.replace(/s$/, "") : unit})`).join(", ")}.`);
  const empty = check.empty_classes || [];
  setText("class-table-empty", empty.length
    ? `${empty.length} of them appear in no image (${empty.slice(0, 6).join(", ")}${empty.length > 6 ? ", …" : ""}): `
      + "each still gets an output of the network; Ignore them here to leave them out."
    : "");
  const report = check.report;
  document.getElementById("label-check-problems").replaceChildren(
    ...Object.entries(report.counts).map(([kind, n]) => listItem(`${n} ${kind}: ${report.meaning[kind]}`)),
    ...report.problems.slice(0, 20).map((p) => listItem(`${p.file}${p.line ? ` line ${p.line}` : ""}: ${p.message}`)),
  );
}

function updateClassMap() {
  const map = {};
  document.querySelectorAll("#class-table-editor tbody tr").forEach((tr) => {
    const [name, ignore] = tr.querySelectorAll("input");
    const source = tr.dataset.sourceClass;
    if (ignore.checked) map[source] = null;
    else if (name.value.trim() && name.value.trim() !== source) map[source] = name.value.trim();
  });
  classMapField.value = Object.keys(map).length ? JSON.stringify(map) : "";
  loadPreview();
}

// The task and label format as the preview read them: "Detect from the source" twice told a new
// user nothing about what the build would make.
function taskWords(value) {
  const check = lastPreview?.label_check;
  const detected = form.elements.task.value === "auto" ? " (detected from the source)" : "";
  if (check) return `${check.task}, ${check.format} labels${detected}`;
  if (lastPreview && form.elements.task.value === "auto") return `classification${detected}`;
  return `${value("task")} (${value("format")})`;
}

// The class table as words ("car → vehicle, tram ignored"): its JSON told a new user nothing.
function classTableWords() {
  let map = {};
  try { map = JSON.parse(classMapField.value || "{}"); } catch { return classMapField.value; } // the server names what is wrong
  const changes = Object.entries(map).map(([source, name]) => (name === null ? `${source} ignored` : `${source} → ${name}`));
  return changes.length ? changes.join(", ") : "as in the source";
}

function fillSummary() {
  const table = document.getElementById("summary");
  const value = (name) => {
    const el = form.querySelector(`[name=${name}]`);
    if (!el) return "";
    return el.tagName === "SELECT" ? el.options[el.selectedIndex].text : el.value;
  };
  const name = form.querySelector("[name=name]");
  if (!name.value && sourcePath.value) name.value = sourcePath.value.replace(/\/+$/, "").split("/").pop();
  const rows = [
    ["Source", sourceChoice() === "upload" ? document.getElementById("upload-status").textContent : sourcePath.value],
    ["Image size", `${value("image_width")} × ${value("image_height")}, ${value("channels")}`],
    ["Resize mode", value("resize_mode")],
    ["Task (labels)", taskWords(value)],
    ["Class table", classTableWords()],
    ["Validation / test", `${value("val_percent")}% / ${value("test_percent")}%`],
    ["Images per class", `at least ${value("min_per_class")}${value("max_per_class") ? `, at most ${value("max_per_class")}` : ""}`],
    ["Stored encoding", value("encoding")],
    ["Shuffle (seed)", `${value("shuffle")} (${value("seed")})`],
  ];
  table.replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    const td = document.createElement("td");
    th.textContent = k;
    td.textContent = v;
    tr.append(th, td);
    return tr;
  }));
}

// After a refused submit, open the step holding the first error.
if (sourcePath.value) form.querySelector("input[name=source_choice][value=server]").checked = true;
showSourceChoice();
offerResizeModes(null);
const firstError = form.querySelector(".errorlist");
const errorStep = firstError ? steps.findIndex((s) => s.contains(firstError)) : -1;
show(errorStep >= 0 ? errorStep : (document.getElementById("form-errors") ? 0 : 0));
