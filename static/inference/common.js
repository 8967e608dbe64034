// Small helpers shared by the inference pages (talking to the server: ../workbench/http.js).
import { getJSON } from "../workbench/http.js";
import { paletteColour } from "../workbench/palette.js";

// Percentages as every page writes them (two decimals): the bar and the table of one result agree.
export { formatPercent as percent } from "../workbench/format.js";

// Click a header to sort by its data-key; `rows` are objects, `render(rows)` redraws the body.
// Each such header's words are a button, the keyboard's way to sort (a th takes no focus);
// the th's aria-sort says the order.
export function sortable(table, getRows, render) {
  let key = null, ascending = true;
  table.querySelectorAll("th[data-key]").forEach((th) => {
    if (!th.querySelector("button.sort")) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      button.append(...th.childNodes);
      th.append(button);
    }
    th.addEventListener("click", () => {
      ascending = key === th.dataset.key ? !ascending : th.dataset.type !== "number";
      key = th.dataset.key;
      table.querySelectorAll("th").forEach((other) => other.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const numeric = th.dataset.type === "number";
      const rows = [...getRows()].sort((a, b) => {
        const x = a[key], y = b[key];
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        const order = numeric ? x - y : String(x).localeCompare(String(y));
        return ascending ? order : -order;
      });
      render(rows);
    });
  });
}

// A drop zone that also opens the file chooser (click, Enter, Space) and hands over one image.
// The zone is a button to assistive technology (role="button" in its template); Space opens the
// chooser without also scrolling the page, as a native button's would.
export function dropImage(zone, input, onFile) {
  zone.addEventListener("click", () => input.click());
  zone.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" && e.key !== " ") return;
    e.preventDefault();
    input.click();
  });
  input.addEventListener("change", () => { if (input.files[0]) onFile(input.files[0]); });
  zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    if (e.dataTransfer.files[0]) onFile(e.dataTransfer.files[0]);
  });
}

// One image on Detect and Segment: drawn at a whole multiple of its pixels (crisp, as pixelated
// rendering is only at whole zooms) up to ZOOM_MOST, as wide as its card allows. A 160x120 image
// stood at 240x180 (the stage's min-width: 1.5 times, uneven pixels) in a third of a 1,920 px
// screen. Returns the zoom shown, for what is drawn on top in the image's own pixels.
const ZOOM_MOST = 4;
export function fitPixels(image, width) {
  const stage = image.closest(".stage");
  const room = stage.parentElement.clientWidth;
  const zoom = Math.max(1, Math.min(ZOOM_MOST, Math.floor(room / width)));
  image.style.minWidth = "0";
  image.style.width = `${width * zoom}px`; // a larger image than its card: max-width shrinks it
  return image.getBoundingClientRect().width / width;
}

// The colour of a detector's class `index` (0-based): the one palette (Okabe-Ito, told apart with
// every common colour-vision deficiency), as workbench/inference/evaluation.BOX_COLOURS draws a
// test's pictures. On a light or a dark image alike a box is edged in black and its label written
// in black or white on a chip of its colour (detect.js): the palette's yellow vanished on white,
// its blue on black.
export function boxColour(index) {
  return paletteColour(index);
}

// A job's page (job.js, task_job.js): follows its state and progress until it ends, then hands
// its result to `show`. `card` carries the job's API address in data-api.
export function followJob(card, show) {
  const stateBox = document.getElementById("job-state");
  const progressBar = document.getElementById("job-progress");
  const progressText = document.getElementById("job-progress-text");
  async function poll() {
    let job;
    try {
      job = await getJSON(card.dataset.api);
    } catch {
      setTimeout(poll, 3000); // the server may be restarting
      return;
    }
    stateBox.innerHTML = `<span class="status status-${job.state}">${job.state}</span>`;
    progressBar.value = job.progress.percent;
    progressText.textContent = job.progress.total ? `${job.progress.done} / ${job.progress.total} images` : "";
    document.getElementById("job-error").textContent = job.error || "";
    if (job.state === "queued" || job.state === "running") { setTimeout(poll, 1000); return; }
    if (job.state === "done" && job.result) show(job.result);
  }
  poll();
}

// The files a job could not read, in a line (the first three named).
export function skippedNote(result) {
  const skipped = result.skipped || [];
  if (!skipped.length) return "";
  const first = skipped.slice(0, 3).map((s) => `${s.path} (${s.reason})`).join("; ");
  return `${skipped.length} file(s) skipped: ${first}${skipped.length > 3 ? "…" : ""}`;
}
