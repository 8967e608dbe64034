// Look inside: the first convolution's filters and the activation maps of chosen layers.
import { postForm } from "../workbench/http.js";
import { formatPercent } from "../workbench/format.js";

const card = document.getElementById("inside");
if (card) {
  const form = document.getElementById("inside-form");
  const error = document.getElementById("inside-error");
  const fmt = (s) => `min ${s.min.toFixed(3)} · max ${s.max.toFixed(3)} · mean ${s.mean.toFixed(3)} · std ${s.std.toFixed(3)} · zeros ${formatPercent(s.zero_share)}`;

  async function submit(event) {
    if (event) event.preventDefault();
    const file = document.getElementById("inside-file").files[0];
    if (!file) { error.textContent = "image: choose an image first"; return; }
    error.textContent = "";
    const data = new FormData();
    data.append("image", file);
    data.append("checkpoint", document.getElementById("inside-checkpoint").value);
    const layers = [...document.getElementById("inside-layers").selectedOptions].map((o) => o.value);
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
  document.getElementById("inside-file").addEventListener("change", () => submit());
}
