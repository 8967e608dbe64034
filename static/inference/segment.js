// Segment one image: drop or pick it, see its classes as a colour overlay (opacity slider), a
// legend with each class's share, and the class under the pointer named.
import { postForm } from "../workbench/http.js";
import { dropImage, fitPixels, percent } from "./common.js";

const card = document.getElementById("segment-one");
if (card) {
  const fileInput = document.getElementById("segment-file");
  const zone = document.getElementById("dropzone");
  const error = document.getElementById("segment-error");
  const opacity = document.getElementById("segment-opacity");
  const overlay = document.getElementById("segment-overlay");
  const hover = document.getElementById("segment-hover");
  let lastFile = null, answer = null, classAt = null;

  async function segment(file) {
    lastFile = file;
    error.textContent = "";
    document.getElementById("segment-result").hidden = true;
    const data = new FormData();
    data.append("image", file);
    data.append("checkpoint", document.getElementById("segment-checkpoint").value);
    zone.textContent = `Segmenting ${file.name}…`;
    try {
      answer = await postForm(card.dataset.api, data);
      await show(file);
      classAt = await readMask(answer.mask);
      zone.textContent = `${file.name}: drop another image, or click to choose one`;
    } catch (exc) {
      error.textContent = exc.message; // it names the file
      zone.textContent = "Drop an image here, or click to choose one";
    }
    zone.appendChild(fileInput);
  }

  async function show(file) {
    const image = document.getElementById("segment-image");
    const loaded = new Promise((resolve) => { image.onload = resolve; image.onerror = resolve; });
    if (image.src) URL.revokeObjectURL(image.src);
    image.src = URL.createObjectURL(file);
    overlay.src = answer.colors;
    setOpacity();
    document.getElementById("segment-legend").replaceChildren(...answer.classes.map((c) => {
      const item = document.createElement("li");
      item.dataset.index = c.index;
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = c.color;
      item.append(swatch, document.createTextNode(`${c.label} ${percent(c.share)}`));
      return item;
    }));
    document.getElementById("segment-result").hidden = false;
    await loaded;
    fitPixels(image, image.naturalWidth);
  }

  // The grey mask (one byte per pixel: the class index) read once into an array, for the pointer.
  async function readMask(url) {
    const image = new Image();
    await new Promise((resolve, reject) => { image.onload = resolve; image.onerror = reject; image.src = url; });
    const canvas = document.createElement("canvas");
    canvas.width = image.naturalWidth;
    canvas.height = image.naturalHeight;
    const context = canvas.getContext("2d", { willReadFrequently: true });
    context.drawImage(image, 0, 0);
    const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
    return { width: canvas.width, height: canvas.height, at: (x, y) => pixels[4 * (y * canvas.width + x)] };
  }

  function setOpacity() {
    overlay.style.opacity = opacity.value;
    document.getElementById("segment-opacity-value").textContent = `${Math.round(opacity.value * 100)}%`;
  }

  const stage = document.getElementById("segment-stage");
  stage.addEventListener("mousemove", (e) => {
    if (!classAt || !answer) return;
    const box = document.getElementById("segment-image").getBoundingClientRect();
    const x = Math.floor(((e.clientX - box.left) / box.width) * classAt.width);
    const y = Math.floor(((e.clientY - box.top) / box.height) * classAt.height);
    if (x < 0 || y < 0 || x >= classAt.width || y >= classAt.height) return;
    const index = classAt.at(x, y);
    const found = answer.classes.find((c) => c.index === index);
    hover.textContent = `(${x}, ${y}): ${found ? found.label : index === 255 ? "ignored" : `class ${index}`}`;
  });
  stage.addEventListener("mouseleave", () => { hover.textContent = "Point at the image to name the class under the pointer."; });

  dropImage(zone, fileInput, segment);
  opacity.addEventListener("input", setOpacity);
  document.getElementById("segment-checkpoint").addEventListener("change", () => { if (lastFile) segment(lastFile); });
}
