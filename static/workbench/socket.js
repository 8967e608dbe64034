// The one way a page follows the server live: a websocket to a path of this host, kept open.
// Every page's stream (the dashboard, a dataset's build, a run, a benchmark, a search and its
// trials' runs) goes through here, so reconnecting behaves the same everywhere:
// - a lost socket is opened again after 1 s, then 2, 4, ... up to 30 s (the server may be
//   restarting; a tight loop would only add to its load), and the delay starts over once open;
// - where the page's protocol replays (the run's: {"since": n}), the last sequence number the page
//   holds is sent on every (re)connect, so the server sends what was missed and nothing twice;
// - each message reaches the page's handler parsed; the page decides what it means.
// The server side is each app's consumer; this module knows none of their message types.

const FIRST_DELAY_MS = 1000;
const MOST_DELAY_MS = 30000;

function socketUrl(path) {
  const scheme = window.location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${window.location.host}${path}`;
}

// Opens `path` and keeps it open while `keepTrying(closeEvent)` says so (by default: always).
//   onMessage(data)     each message, JSON-parsed
//   onOpen({reconnected})  on each open; `reconnected` after a lost socket (read again what changed)
//   onClose(closeEvent, {retrying})  on each close, before any retry is scheduled
//   since()             the last sequence number held: sent as {"since": n} on each open
//   adopt               {socket, messages}: a socket the page opened (and greeted) before its
//                       modules loaded, used first, with the messages it has received meanwhile
// Returns a handle: `socket` (the current one), `catchUp()` (send {"since": n} again now) and
// `send(data)`.
export function openSocket(path, { onMessage = () => {}, onOpen = () => {}, onClose = () => {},
  keepTrying = () => true, since = null, adopt = null } = {}) {
  let delayMs = FIRST_DELAY_MS;
  let opens = 0;
  const handle = {
    socket: null,
    send(data) { handle.socket.send(JSON.stringify(data)); },
    catchUp() { handle.send({ since: since() }); },
  };

  function connect(early) {
    const socket = early ? early.socket : new WebSocket(socketUrl(path));
    handle.socket = socket;
    const received = (message) => onMessage(JSON.parse(message.data));
    const opened = (greeted) => {
      delayMs = FIRST_DELAY_MS;
      opens += 1;
      onOpen({ reconnected: opens > 1 });
      if (since && !greeted) handle.catchUp();
    };
    socket.addEventListener("open", () => opened(Boolean(early)));
    socket.addEventListener("message", received);
    socket.addEventListener("close", (closed) => {
      const retrying = Boolean(keepTrying(closed));
      onClose(closed, { retrying });
      if (!retrying) return;
      window.setTimeout(() => connect(null), delayMs);
      delayMs = Math.min(delayMs * 2, MOST_DELAY_MS);
    });
    if (early) {
      if (socket.readyState === WebSocket.OPEN) opened(true); // its opener sent the greeting
      early.messages.forEach(received);
    }
  }

  const usable = adopt && adopt.socket.readyState <= WebSocket.OPEN;
  handle.adopted = Boolean(usable);
  connect(usable ? adopt : null);
  return handle;
}
