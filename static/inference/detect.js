// Detect one image: drop or pick it, see its boxes with class and score drawn on it; the score
// slider and the class boxes filter the boxes the server returned, without asking it again.
import { postForm } from "../workbench/http.js";
import { boxColour, dropImage, fitPixels, percent } from "./common.js";
import { inkOn } from "../workbench/palette.js";

const card = document.getElementById("detect-one");
if (card) {
  const fileInput = document.getElementById("detect-file");
  const zone = document.getElementById("dropzone");
  const error = document.getElementById("detect-error");
  const threshold = document.getElementById("detect-threshold");
  const classes = document.getElementById("detect-classes");
  const svg = document.getElementById("detect-boxes");
  let lastFile = null, answer = null;

  async function detect(file) {
    lastFile = file;
    error.textContent = "";
    document.getElementById("detect-result").hidden = true;
    const data = new FormData();
    data.append("image", file);
    data.append("checkpoint", document.getElementById("detect-checkpoint").value);
    data.append("min_score", "0.05"); // the slider filters from here, in the page
    zone.textContent = `Detecting in ${file.name}…`;
    try {
      answer = await postForm(card.dataset.api, data);
      await showImage(file);
      showClasses(answer.labels);
      draw();
      zone.textContent = `${file.name}: drop another image, or click to choose one`;
    } catch (exc) {
      error.textContent = exc.message; // it names the file
      zone.textContent = "Drop an image here, or click to choose one";
    }
    zone.appendChild(fileInput);
  }

  let zoom = 1;
  async function showImage(file) {
    const image = document.getElementById("detect-image");
    const loaded = new Promise((resolve) => { image.onload = resolve; image.onerror = resolve; });
    if (image.src) URL.revokeObjectURL(image.src);
    image.src = URL.createObjectURL(file);
    // Boxes are in the image's own pixels: the SVG's view box is the image, whatever size it is shown at.
    svg.setAttribute("viewBox", `0 0 ${answer.width} ${answer.height}`);
    document.getElementById("detect-result").hidden = false;
    await loaded;
    zoom = fitPixels(image, answer.width);
  }

  function showClasses(labels) {
    const wanted = new Set([...classes.querySelectorAll("input:not(:checked)")].map((box) => box.value));
    classes.replaceChildren(classes.querySelector("legend") || document.createElement("legend"));
    labels.forEach((label, index) => {
      const item = document.createElement("label");
      item.style.fontWeight = "normal";
      const box = document.createElement("input");
      box.type = "checkbox";
      box.value = label;
      box.checked = !wanted.has(label); // a class turned off stays off for the next image
      box.addEventListener("change", draw);
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = boxColour(index);
      item.append(box, swatch, document.createTextNode(label));
      classes.appendChild(item);
    });
  }

  function draw() {
    if (!answer) return;
    const min = Number(threshold.value);
    document.getElementById("detect-threshold-value").textContent = min.toFixed(2);
    const on = new Set([...classes.querySelectorAll("input:checked")].map((box) => box.value));
    const shown = answer.boxes.filter((b) => b.score >= min && on.has(b.label));
    const ns = "http://www.w3.org/2000/svg";
    const element = (name, attributes) => {
      const made = document.createElementNS(ns, name);
      Object.entries(attributes).forEach(([k, v]) => made.setAttribute(k, v));
      return made;
    };
    const colour = (b) => boxColour(answer.labels.indexOf(b.label));
    const boxes = shown.map((b) => {
      const [x1, y1, x2, y2] = b.box;
      const group = element("g", { class: "box" });
      // The coloured line on a black one a pixel wider each side: seen on white and on black alike.
      group.append(...[["#000", 4], [colour(b), 2]].map(([stroke, width]) => element("rect", {
        x: x1, y: y1, width: x2 - x1, height: y2 - y1, fill: "none", stroke, "stroke-width": width,
        "vector-effect": "non-scaling-stroke" })));
      return group;
    });
    // The labels over every box (a box's line crossed another's label), each in black or white on
    // its class's colour: the colour's own text vanished on a scene of its colour (the blue on a
    // dark photo). Placed by placeLabel once they can be measured.
    const labels = shown.map((b) => {
      const group = element("g", { class: "label" });
      const text = element("text", { "dominant-baseline": "hanging", fill: inkOn(colour(b)) });
      // The labels' size on screen, whatever the zoom: in image pixels they grew with it and piled up.
      text.style.fontSize = `${12 / zoom}px`;
      text.textContent = `${b.label} ${percent(b.score)}`;
      const title = element("title", {});
      title.textContent = text.textContent;
      group.append(element("rect", { class: "chip", fill: colour(b) }), text, title);
      return group;
    });
    svg.replaceChildren(...boxes, ...labels);
    labels.forEach((group, i) => placeLabel(group, shown[i].box));
    document.getElementById("detect-summary").textContent =
      `${shown.length} of ${answer.boxes.length} boxes shown (score ≥ ${min.toFixed(2)})${hiddenNote(shown, on)} · ${answer.checkpoint}`;
    // An empty table under "0 of 23 boxes" read as if the page had failed: no rows, no table.
    document.getElementById("detect-table").hidden = !shown.length;
    document.querySelector("#detect-table tbody").replaceChildren(...shown.map((b) => {
      const tr = document.createElement("tr");
      for (const value of [b.label, percent(b.score), b.box.map((v) => v.toFixed(1)).join(", ")]) {
        const td = document.createElement("td");
        td.textContent = value;
        tr.appendChild(td);
      }
      return tr;
    }));
  }

  // A label above its box where there is room, else just inside it; never past the image's edges
  // (a box at the right edge had its label cut off there).
  function placeLabel(group, [x1, y1]) {
    const chip = group.querySelector(".chip");
    const text = group.querySelector("text");
    const pad = 2 / zoom;
    const size = text.getBBox();
    const width = size.width + 2 * pad, height = size.height + 2 * pad;
    const x = Math.max(0, Math.min(x1, answer.width - width));
    const y = Math.max(0, Math.min(y1 >= height ? y1 - height : y1, answer.height - height));
    Object.entries({ x, y, width, height }).forEach(([k, v]) => chip.setAttribute(k, v));
    text.setAttribute("x", x + pad);
    text.setAttribute("y", y + pad);
  }

  // Why nothing is drawn: an undertrained detector's boxes all score under the default 0.50, and
  // a new user saw a bare image with no hint that the slider would show them.
  function hiddenNote(shown, on) {
    if (shown.length) return "";
    if (!answer.boxes.length) return ": the network found nothing scoring 0.05 or more in this image";
    const kept = answer.boxes.filter((b) => on.has(b.label));
    if (!kept.length) return ": every box is of a class turned off above";
    const best = Math.max(...kept.map((b) => b.score));
    return `: the highest score is ${percent(best)}; move the slider below it to see the boxes`;
  }

  dropImage(zone, fileInput, detect);
  threshold.addEventListener("input", draw);
  document.getElementById("detect-checkpoint").addEventListener("change", () => { if (lastFile) detect(lastFile); });
}
