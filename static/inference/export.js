// The download page: a worker builds an export the first time it is asked for, so the page asks
// for its state until it is ready (showing how long it has waited), then downloads the zip.
import { requestJSON } from "../workbench/http.js";

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

// No form while the run has no checkpoint.
if (form) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const url = `${form.action}?${new URLSearchParams(new FormData(form))}`;
    button.disabled = true;
    try {
      const ready = await fetchWhenReady(url, performance.now());
      say(`${ready.detail} Downloading…`, "now");
      window.location.href = url;
    } catch (error) {
      say(error.message, "error");
    } finally {
      button.disabled = false;
    }
  });
}
