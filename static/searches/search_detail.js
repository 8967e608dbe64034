// The search page: the trials table, the best, the budget and Optuna's plots. Its socket
// (/ws/searches/<id>/) pings whenever the search or a trial changes (a trial starts, reports at a
// rung, is pruned or ends); the page then reads the search and its plots again from the API. It
// also listens on the socket of each active trial's run (the run page's own) for the run's state
// (queued, running, paused), which is the run's, not the search's. Only a waiting trial's reason,
// which changes without an event (as on the run page), is read again every few seconds.
import { formatMetric, formatSetting, metricName } from "../workbench/format.js";
import { getJSON, sendJSON } from "../workbench/http.js";
import { openSocket } from "../workbench/socket.js";
import { themedFigure } from "./optuna_figure.js";
import { onThemeChange } from "../workbench/theme.js";

const page = JSON.parse(document.getElementById("search-page").textContent);
const sockets = new Map(); // run id -> WebSocket
const FINISHED_RUN = ["done", "failed", "aborted", "pruned"];
const FINISHED_SEARCH = ["done", "aborted"];
const picked = new Set(); // run ids of the trials ticked for the compare page
let refreshing = null;
let again = false;
let busy = false; // an action's request is in flight: every button waits for its answer
let actions = null; // what the search takes now, as the server last said (selectors.possible_actions)

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text;
  return td;
}

function params(trial) {
  return Object.entries(trial.params).map(([name, value]) => `${name}=${formatSetting(value)}`).join(", ");
}

function renderTrials(search) {
  // A trial's value is the weights' average's when its run keeps one (`series` says which key).
  const averaged = (trial) => trial.series !== search.objective;
  const rows = search.trials.map((trial) => {
    const tr = document.createElement("tr");
    tr.dataset.number = trial.number;
    const run = document.createElement("td");
    if (trial.run) {
      const link = document.createElement("a");
      link.href = `/runs/${trial.run}/`;
      link.textContent = `#${trial.run}`;
      run.append(link);
    }
    const pick = document.createElement("td");
    if (trial.run) {
      const box = document.createElement("input");
      box.type = "checkbox";
      box.value = trial.run;
      box.checked = picked.has(String(trial.run));
      box.setAttribute("aria-label", `compare trial ${trial.number}`);
      box.addEventListener("change", () => (box.checked ? picked.add(box.value) : picked.delete(box.value)));
      pick.append(box);
    }
    const value = trial.value === null ? "" : `${shown(search, trial.value)}${averaged(trial) ? " (EMA)" : ""}`;
    // A running trial says what its run does: queued with why, until it really runs.
    const why = trial.wait_reason ? `waiting: ${trial.wait_reason}` : trial.reason;
    const status = cell(trial.status);
    status.className = "trial-status";
    tr.append(pick, cell(trial.number), status, cell(params(trial)), cell(value), cell(trial.rung ?? ""), run, cell(why));
    return tr;
  });
  document.querySelector("#trials tbody").replaceChildren(...rows);
  document.getElementById("search-state").textContent = search.state;
  document.getElementById("search-budget").textContent = search.budget;
  document.getElementById("search-reason").textContent = search.reason;
  const best = search.best;
  document.getElementById("search-best").textContent = best
    ? `trial ${best.number}, ${metricName(search.objective)} ${shown(search, best.value)}${averaged(best) ? " (EMA)" : ""}`
    : "none yet";
  renderBestRun(search.best_run);
  actions = search.actions;
  showActions();
}

const shown = (search, value) => formatMetric(search.objective, value);

function renderBestRun(bestRun) {
  document.getElementById("search-best-run-line").hidden = !bestRun;
  if (!bestRun) return;
  const link = document.createElement("a");
  link.href = `/runs/${bestRun.id}/`;
  link.textContent = `run #${bestRun.id}`;
  document.getElementById("search-best-run").replaceChildren(link, ` (trial ${bestRun.trial}, ${bestRun.state})`);
}

// A button offers what the search's state allows, and none while an action's answer is awaited.
function showActions() {
  document.getElementById("search-actions").setAttribute("aria-busy", String(busy));
  for (const button of document.querySelectorAll("[data-action]")) {
    button.disabled = busy || (actions !== null && !actions[button.dataset.action]);
  }
}

let shownFigures = null;
// The trials' colours are the figures' data, not the template's: drawn again in the new theme's.
onThemeChange(() => { if (shownFigures) renderPlots(shownFigures); });

function renderPlots(figures) {
  shownFigures = figures;
  const grid = document.getElementById("search-plots");
  const drawn = Object.values(figures).some(({ figure }) => figure);
  document.getElementById("search-plots-note").textContent = drawn ? "" : "No plot yet: they need trials that reported.";
  for (const [key, { title, figure, note }] of Object.entries(figures)) {
    let card = document.getElementById(`plot-${key}`);
    if (!card) {
      card = document.createElement("section");
      card.className = "card chart-card";
      card.id = `plot-${key}`;
      const heading = document.createElement("h2");
      heading.textContent = title;
      const chart = document.createElement("div");
      chart.className = "chart";
      const hint = document.createElement("p");
      hint.className = "hint";
      card.append(heading, chart, hint);
      grid.append(card);
    }
    const [chart, hint] = [card.querySelector(".chart"), card.querySelector(".hint")];
    hint.textContent = note;
    // Optuna's figure names Plotly's white template: the workbench's theme replaces it (optuna_figure.js).
    if (!figure) continue;
    const { data, layout } = themedFigure(figure);
    window.Plotly.react(chart, data, layout, { responsive: true });
  }
}

function listen(search) {
  for (const trial of search.trials) {
    if (!trial.run || sockets.has(trial.run) || FINISHED_RUN.includes(trial.run_state)) continue;
    // Live events only (no {"since"}: the trials table is read from the API); a lost socket is
    // not reopened here, the next read of the search opens it again while the run is active.
    const { socket } = openSocket(`/ws/runs/${trial.run}/`, {
      onMessage: (data) => {
        const events = data.type === "events" ? data.events : [];
        if (events.some((event) => event.type === "validation" || event.type === "status")) refresh();
      },
      onClose: () => sockets.delete(trial.run),
      keepTrying: () => false,
    });
    sockets.set(trial.run, socket);
  }
}

let waitTimer = null;
function watchWaiting(search) {
  window.clearTimeout(waitTimer);
  // A queued trial's run may have no reason yet: the next scheduling pass gives it one.
  const waits = (trial) => trial.wait_reason || trial.status === "queued";
  if (search.trials.some(waits)) waitTimer = window.setTimeout(readWaiting, 5000);
}

// The search alone: its plots have not changed while its trials wait.
async function readWaiting() {
  try {
    const search = await getJSON(page.api);
    renderTrials(search);
    listen(search);
    watchWaiting(search);
  } catch (error) {
    document.getElementById("search-message").textContent = error.message;
  }
}

// One read at a time; a report that arrives meanwhile asks for one more read after it.
async function refresh() {
  if (refreshing) {
    again = true;
    return;
  }
  refreshing = (async () => {
    try {
      const search = await getJSON(page.api);
      renderTrials(search);
      listen(search);
      watchWaiting(search);
      renderPlots((await getJSON(page.plots)).figures);
    } catch (error) {
      document.getElementById("search-message").textContent = error.message;
    }
  })();
  await refreshing;
  refreshing = null;
  if (again) {
    again = false;
    refresh();
  }
}

document.getElementById("compare-trials").addEventListener("click", () => {
  const runs = [...picked];
  if (runs.length) window.location.href = `${page.compare}?runs=${runs.join(",")}`;
  else document.getElementById("search-message").textContent = "tick the trials to compare first";
});

const DOING = {
  pause: "Pausing the search…", resume: "Resuming the search…", abort: "Aborting the search…",
  "train-best": "Queuing a full run of the best trial…",
};

async function act(action) {
  const message = document.getElementById("search-message");
  busy = true;
  showActions();
  message.textContent = DOING[action];
  let answer;
  try {
    answer = await sendJSON(page.actions[action], { body: {} });
  } catch (error) {
    message.textContent = error.message;
    busy = false;
    showActions();
    return;
  }
  if (action === "train-best") {
    // Asked again while that run lives, the server answers it instead of queuing a second; the
    // buttons stay waiting until its page opens.
    message.textContent = `run #${answer.id} (${answer.state}); opening its page…`;
    window.location.href = `/runs/${answer.id}/`;
    return;
  }
  busy = false;
  message.textContent = "";
  renderTrials(answer);
}

for (const button of document.querySelectorAll("[data-action]")) {
  button.addEventListener("click", () => {
    if (busy) return;
    if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
    act(button.dataset.action);
  });
}

// The first ping comes on connect: a reconnect reads again whatever it missed meanwhile.
openSocket(`/ws/searches/${page.id}/`, {
  onMessage: () => refresh(),
  keepTrying: () => !FINISHED_SEARCH.includes(document.getElementById("search-state").textContent),
});
