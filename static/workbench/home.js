// Dashboard: keeps the status and progress of datasets and runs current over a websocket.
// Events: {type: "update", kind: "dataset"|"run", id, status, percent}.

const dashboard = document.getElementById("dashboard");

function rowFor(kind, id) {
  return dashboard.querySelector(`tr[data-${kind}-id="${id}"]`);
}

function applyUpdate(event) {
  const row = rowFor(event.kind, event.id);
  if (!row) return;
  if (event.status) {
    const badge = row.querySelector(".js-status .status");
    badge.textContent = event.status;
    badge.className = `status status-${event.status}`;
  }
  if (typeof event.percent === "number") {
    const bar = row.querySelector(".js-progress .progress");
    bar.setAttribute("aria-valuenow", Math.round(event.percent));
    bar.querySelector(".bar").style.width = `${event.percent}%`;
  }
}

function connect(delayMs) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}${dashboard.dataset.socketPath}`);
  socket.addEventListener("message", (message) => {
    const event = JSON.parse(message.data);
    if (event.type === "update") applyUpdate(event);
  });
  socket.addEventListener("open", () => { delayMs = 1000; });
  // Reconnect with a growing delay: the server may be restarting.
  socket.addEventListener("close", () => setTimeout(() => connect(Math.min(delayMs * 2, 30000)), delayMs));
}

if (dashboard) connect(1000);
