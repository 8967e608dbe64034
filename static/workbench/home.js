// Dashboard: keeps the status and progress of datasets and runs current over a websocket.
// Events: {type: "update", kind: "dataset"|"run", id, status, percent}.
// A progress is written in place; a new state, or a dataset or run the page does not show yet,
// changes what the cards list (what runs now, where): the page is read again and its cards swapped.
import { getPage } from "./http.js";
import { openSocket } from "./socket.js";

const dashboard = document.getElementById("dashboard");
const CARDS = ["home-running", "home-datasets", "home-runs"];
const REFRESH_MS = 1000;

function rowsFor(kind, id) {
  return [...dashboard.querySelectorAll(`tr[data-${kind}-id="${id}"]`)];
}

function showPercent(row, percent) {
  const bar = row.querySelector(".js-progress .progress");
  if (!bar) return;
  bar.setAttribute("aria-valuenow", Math.round(percent));
  bar.setAttribute("aria-valuetext", `${Math.round(percent)} %`);
  bar.querySelector(".bar").style.width = `${percent}%`;
}

function applyUpdate(event) {
  const rows = rowsFor(event.kind, event.id);
  const shown = rows.map((row) => row.querySelector(".js-status .status")?.textContent).find(Boolean);
  if (!rows.length || (event.status && event.status !== shown)) refreshSoon();
  if (typeof event.percent === "number") rows.forEach((row) => showPercent(row, event.percent));
}

// At most one read of the page per REFRESH_MS, however many updates arrive.
let refreshTimer = null;
function refreshSoon() {
  if (refreshTimer !== null) return;
  refreshTimer = window.setTimeout(refresh, REFRESH_MS);
}

async function refresh() {
  const html = await getPage(window.location.href).catch(() => null); // the next update asks again
  refreshTimer = null;
  if (html === null) return;
  const fresh = new DOMParser().parseFromString(html, "text/html");
  CARDS.forEach((id) => {
    const card = fresh.getElementById(id);
    if (card) document.getElementById(id).replaceWith(document.adoptNode(card));
  });
}

// Whatever changed while the socket was down (a restart of the server) shows on reconnect.
if (dashboard) {
  openSocket(dashboard.dataset.socketPath, {
    onMessage: (event) => { if (event.type === "update") applyUpdate(event); },
    onOpen: ({ reconnected }) => { if (reconnected) refreshSoon(); },
  });
}
