// Look inside: the first convolution's filters and the activation maps of the ticked layers; a
// short vector (the logits) as bars named by class.
import { postForm } from "../workbench/http.js";
import { formatPercent } from "../workbench/format.js";

const card = document.getElementById("inside");
if (card) {
  const form = document.getElementById("inside-form");
  const error = document.getElementById("inside-error");
  const fmt = (s) => `min ${s.min.toFixed(3)} · max ${s.max.toFixed(3)} · mean ${s.mean.toFixed(3)} · std ${s.std.toFixed(3)} · zeros ${formatPercent(s.zero_share)}`;

  const MAX_LAYERS = 8; // the API's limit
  const layerBoxes = [...form.querySelectorAll("input[name=layers]")];
  const tickedLayers = () => layerBoxes.filter((box) => box.checked);

  // At the limit the other boxes rest disabled, so the ninth cannot be ticked and refused later.
  function countLayers() {
    const ticked = tickedLayers().length;
    document.getElementById("inside-layer-count").textContent = `(${ticked} of up to ${MAX_LAYERS} ticked)`;
    for (const box of layerBoxes) box.disabled = !box.checked && ticked >= MAX_LAYERS;
  }

  // A short vector (the logits) as bars named by class, from zero: right for positive, left for negative.
  function bars(activation) {
    const list = document.createElement("div");
    list.className = "value-bars";
    const largest = Math.max(1e-12, ...activation.values.map(Math.abs));
    activation.values.forEach((value, i) => {
      const row = document.createElement("div");
      row.className = "value-bar";
      const name = document.createElement("span");
      name.className = "bar-label";
      name.textContent = activation.labels ? activation.labels[i] : `#${i}`;
      const track = document.createElement("span");
      track.className = "bar-track";
      const bar = document.createElement("span");
      bar.className = value < 0 ? "bar negative" : "bar";
      bar.style.width = `${(50 * Math.abs(value)) / largest}%`;
      track.append(bar);
      const number = document.createElement("span");
      number.className = "bar-value";
      number.textContent = value.toFixed(3);
      row.append(name, track, number);
      list.append(row);
    });
    return list;
  }

  async function submit(event) {
    if (event) event.preventDefault();
    const file = document.getElementById("inside-file").files[0];
    if (!file) { error.textContent = "image: choose an image first"; return; }
    error.textContent = "";
    const data = new FormData();
    data.append("image", file);
    data.append("checkpoint", document.getElementById("inside-checkpoint").value);
    const layers = tickedLayers().map((box) => box.value);
    data.append("layers", layers.join(","));
    try {
      show(await postForm(card.dataset.api, data));
    } catch (exc) {
      error.textContent = exc.message;
    }
  }

  function show(body) {
    document.getElementById("inside-result").hidden = false;
    document.getElementById("inside-seen").src = body.preprocessed;
    document.getElementById("inside-predictions").replaceChildren(...body.predictions.map((p) => {
      const li = document.createElement("li");
      li.textContent = `${p.label}: ${formatPercent(p.probability)}`;
      return li;
    }));
    if (body.filters) {
      document.getElementById("filters").src = body.filters.image;
      document.getElementById("filters-shape").textContent = body.filters.shape.join(" × ");
      document.getElementById("filters-stats").textContent = fmt(body.filters.stats);
    }
    document.getElementById("activations").replaceChildren(...body.activations.map((a) => {
      const section = document.createElement("figure");
      section.className = "activation";
      const title = document.createElement("h3");
      title.textContent = `${a.name} (${a.type})${a.shape ? ": " + a.shape.join(" × ") : ""}`;
      section.appendChild(title);
      if (a.error) {
        const p = document.createElement("p");
        p.textContent = a.error;
        section.appendChild(p);
        return section;
      }
      if (a.values) {
        const caption = document.createElement("figcaption");
        caption.className = "stats";
        caption.textContent = fmt(a.stats);
        section.append(bars(a), caption);
        return section;
      }
      const img = document.createElement("img");
      img.className = "grid-image";
      img.src = a.image;
      img.alt = `Activations of ${a.name}`;
      const stats = document.createElement("figcaption");
      stats.className = "stats";
      stats.textContent = `${fmt(a.stats)} · ${a.shown_channels} channel(s) shown`;
      section.append(img, stats);
      return section;
    }));
  }

  form.addEventListener("submit", submit);
  form.addEventListener("change", (event) => { if (event.target.name === "layers") countLayers(); });
  countLayers();
  document.getElementById("inside-file").addEventListener("change", () => submit());
}
