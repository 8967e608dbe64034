// Classify one image: drop or pick it, see the top-k as a bar chart, and the image as uploaded
// beside the image as the net saw it.
import { postForm } from "../workbench/http.js";
import { percent } from "./common.js";
import { plotlyText } from "../workbench/plotly_text.js";
import { PALETTE } from "../workbench/palette.js";
import { themed } from "../workbench/plotly_theme.js";

const card = document.getElementById("classify-one");
if (card) {
  const fileInput = document.getElementById("classify-file");
  const zone = document.getElementById("dropzone");
  const error = document.getElementById("classify-error");
  let lastFile = null;

  async function classify(file) {
    lastFile = file;
    error.textContent = "";
    // The result on show belongs to the previous image: it goes before this one's answer comes.
    document.getElementById("classify-result").hidden = true;
    const data = new FormData();
    data.append("image", file);
    data.append("checkpoint", document.getElementById("classify-checkpoint").value);
    data.append("top_k", document.getElementById("classify-topk").value);
    zone.textContent = `Classifying ${file.name}…`;
    try {
      const body = await postForm(card.dataset.api, data);
      if (file !== lastFile) return; // a newer image was chosen while this one was classified
      showOriginal(file);
      show(body);
      zone.textContent = `${file.name}: drop another image, or click to choose one`;
    } catch (exc) {
      error.textContent = exc.message; // it names the file
      zone.textContent = "Drop an image here, or click to choose one";
    }
    zone.appendChild(fileInput);
  }

  // The image as the user gave it, from their own file: no second upload, no server copy.
  function showOriginal(file) {
    const original = document.getElementById("classify-original");
    if (original.src.startsWith("blob:")) URL.revokeObjectURL(original.src);
    original.onload = () => {
      document.getElementById("classify-original-caption").textContent =
        `as uploaded: ${original.naturalWidth}×${original.naturalHeight}, ${file.name}`;
    };
    original.src = URL.createObjectURL(file);
  }

  function show(body) {
    document.getElementById("classify-result").hidden = false;
    const seen = document.getElementById("classify-seen");
    seen.src = body.preprocessed;
    const pre = body.preprocessing;
    document.getElementById("classify-seen-caption").textContent =
      `as the network saw it: ${pre.input_shape[2]}×${pre.input_shape[1]}, ${pre.resize_mode}` +
      (pre.crop ? `, centre crop ${pre.crop}` : "") + ` · ${body.checkpoint}`;
    const rows = [...body.predictions].reverse();
    Plotly.react("classify-chart", [{
      type: "bar", orientation: "h", x: rows.map((r) => r.probability), y: rows.map((r) => plotlyText(r.label)),
      text: rows.map((r) => percent(r.probability)), textposition: "auto", marker: { color: PALETTE[0] },
    }], themed({
      margin: { l: 10, r: 10, t: 10, b: 30 }, xaxis: { range: [0, 1], tickformat: ".0%" },
      // Class names such as "1" or "7" are names, not numbers.
      yaxis: { type: "category", automargin: true },
      height: Math.max(180, 36 * rows.length + 60),
    }), { displayModeBar: false, responsive: true });
    document.querySelector("#classify-table tbody").replaceChildren(...body.predictions.map((p) => {
      const tr = document.createElement("tr");
      tr.innerHTML = "<td></td><td></td>";
      tr.children[0].textContent = p.label;
      tr.children[1].textContent = percent(p.probability);
      return tr;
    }));
  }

  zone.addEventListener("click", () => fileInput.click());
  zone.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") fileInput.click(); });
  fileInput.addEventListener("change", () => { if (fileInput.files[0]) classify(fileInput.files[0]); });
  zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    if (e.dataTransfer.files[0]) classify(e.dataTransfer.files[0]);
  });
  for (const id of ["classify-checkpoint", "classify-topk"]) {
    document.getElementById(id).addEventListener("change", () => { if (lastFile) classify(lastFile); });
  }
}
