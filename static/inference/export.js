// The download page: a worker builds an export the first time it is asked for, so the page asks
// for its state until it is ready (showing how long it has waited), then downloads the zip.
import { requestJSON } from "../workbench/http.js";
import { formatPercent, formatWhole } from "../workbench/format.js";

const form = document.getElementById("export-form");
const status = document.getElementById("export-status");
const button = document.getElementById("export-download");

function say(text, kind) {
  status.textContent = text;
  status.className = `notice ${kind}`;
  status.hidden = !text;
}

async function fetchWhenReady(url, started) {
  const { status: code, body } = await requestJSON(`${url}&status=1`);
  if (code === 202) {
    const seconds = Math.round((performance.now() - started) / 1000);
    // Builds take seconds to a minute; much longer usually means no worker is taking them.
    const hint = seconds > 120 ? " This is taking long: the GPUs page shows whether a worker is online." : "";
    say(`${body.detail} Waiting ${seconds} s…${hint}`, "wait");
    await new Promise((resolve) => setTimeout(resolve, 1000 * (body.retry_after || 2)));
    return fetchWhenReady(url, started);
  }
  return body;
}

// The comparison with PyTorch the export passed, in words: the page said "checked" before, and
// a user could not see what was compared or how closely it agreed.
const small = (value) => Number(value).toPrecision(2);
function checkWords(check, format) {
  if (!check) return "";
  const model = format === "onnx" ? "The ONNX model (run by onnxruntime)" : "The TorchScript model";
  const images = `${formatWhole(check.images)}${check.split ? ` ${check.split}` : ""} images of the dataset`;
  // A check that compared nothing (trainer.export.judged) is no check: said so, with its reason.
  if (check.checked === false) return `${model} could not be checked against PyTorch on ${images}: ${check.not_checked}.`;
  if (check.boxes !== undefined) {
    return `${model} found the same ${formatWhole(check.boxes)} boxes as PyTorch on ${images}; `
      + `the largest difference is ${small(check.max_box_diff)} px in a corner and ${small(check.max_score_diff)} in a score.`;
  }
  if (check.same_classes !== undefined) {
    return `${model} gave ${formatPercent(check.same_classes)} of the pixels the same class as PyTorch on ${images}; `
      + `the largest difference in a class score is ${small(check.max_abs_diff)}.`;
  }
  return `${model} gave the same top-1 class as PyTorch on ${formatWhole(check.same_top1)} of ${images}.`;
}

// No form while the run has no checkpoint.
if (form) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const url = `${form.action}?${new URLSearchParams(new FormData(form))}`;
    // Disabled while the worker builds it, and Chromium takes the focus from a disabled button:
    // it gets the focus back, or the keyboard's next key went to the page.
    const hadFocus = document.activeElement === button;
    button.disabled = true;
    document.getElementById("export-check").hidden = true; // the last export's, until this one is ready
    try {
      const ready = await fetchWhenReady(url, performance.now());
      say(`${ready.detail} Downloading…`, "now");
      const check = document.getElementById("export-check");
      check.textContent = checkWords(ready.check, form.elements.format.value);
      check.hidden = !check.textContent;
      window.location.href = url;
    } catch (error) {
      say(error.message, "error");
    } finally {
      button.disabled = false;
      if (hadFocus && document.activeElement === document.body) button.focus();
    }
  });
}
