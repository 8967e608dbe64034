// GPUs page: refreshes the worker table every few seconds and runs an on-demand probe task.
import { getJSON, sendJSON } from "./http.js";

const container = document.getElementById("workers");
const probeButton = document.getElementById("probe");
const probeResult = document.getElementById("probe-result");

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text;
  return td;
}

function badge(className, text) {
  const span = document.createElement("span");
  span.className = `status ${className}`;
  span.textContent = text;
  return span;
}

function holder(device) {
  if (device.run) return `${device.run.name} (${device.run.owner})`;
  return device.in_use ? "another user's run" : "free";
}

// "3 devices: 2 simulated GPUs, 1 CPU", as the worker's heartbeat lists them in the table.
function describeDevices(devices) {
  const counts = new Map();
  for (const d of devices) {
    const what = d.kind === "cpu" ? "CPU" : `${d.simulated ? "simulated " : ""}GPU`;
    counts.set(what, (counts.get(what) || 0) + 1);
  }
  const parts = [...counts].map(([what, n]) => `${n} ${what}${n === 1 ? "" : "s"}`);
  return `${devices.length} device${devices.length === 1 ? "" : "s"}: ${parts.join(", ")}`;
}

// A simulated GPU has no counters: held by a run, it says so in words, never a measured-looking 0 %.
function utilisation(device) {
  if (device.simulated && device.kind !== "cpu") return device.in_use ? "in use (simulated)" : "idle (simulated)";
  return device.utilization_percent == null ? "–" : `${Math.round(device.utilization_percent)} %`;
}

function render(hosts) {
  if (!hosts.length) return;  // keep the server-rendered empty state
  container.replaceChildren(...hosts.map((host) => {
    const section = document.createElement("section");
    section.className = "card worker";
    const title = document.createElement("h2");
    title.append(`${host.hostname} `, badge(host.online ? "status-ready" : "status-failed", host.online ? "online" : "offline"));
    if (host.simulated) title.append(" ", badge("status-simulated", "simulated GPUs"));
    const hint = document.createElement("p");
    hint.className = "hint";
    hint.textContent = `Last heartbeat ${host.seconds_since_heartbeat} s ago.`;
    const table = document.createElement("table");
    table.innerHTML = "<thead><tr><th>Device</th><th>Name</th><th>Memory used / total</th><th>Utilisation</th><th>Temperature</th><th>In use by</th></tr></thead>";
    const body = document.createElement("tbody");
    for (const device of host.devices) {
      const row = document.createElement("tr");
      row.append(
        cell(device.label),
        cell(device.simulated ? `${device.name} (simulated)` : device.name),
        cell(`${device.memory_used_mb} / ${device.memory_total_mb} MiB`),
        cell(utilisation(device)),
        cell(device.temperature_c == null ? "–" : `${Math.round(device.temperature_c)} °C`),
        cell(holder(device)),
      );
      body.append(row);
    }
    table.append(body);
    section.append(title, hint, table);
    return section;
  }));
}

async function refresh() {
  try {
    render((await getJSON(container.dataset.api)).hosts);
  } catch {
    // The server may be restarting; the next refresh tries again.
  }
}

async function probe() {
  probeButton.disabled = true;
  probeResult.textContent = "Queued…";
  try {
    const { task_id: taskId } = await sendJSON(container.dataset.probeUrl);
    for (let attempt = 0; attempt < 60; attempt += 1) {
      const status = await getJSON(`/api/tasks/${taskId}/`);
      if (status.state === "SUCCESS") {
        probeResult.textContent = `Worker ${status.result.hostname} answered: ${describeDevices(status.result.devices)}.`;
        return;
      }
      if (status.state === "FAILURE") {
        probeResult.textContent = `The probe failed: ${status.error}`;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    probeResult.textContent = "No worker answered within 30 s.";
  } catch (error) {
    probeResult.textContent = `The probe could not run: ${error.message}`;
  } finally {
    probeButton.disabled = false;
  }
}

probeButton.addEventListener("click", probe);
setInterval(refresh, 5000);
