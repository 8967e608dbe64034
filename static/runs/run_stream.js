// A run's event stream over its socket: a replay of what the page has not seen (series, then
// events after the last sequence number it holds), then live events in order; a gap (the channel
// layer drops for slow clients) asks for a replay and holds what came meanwhile. What the events
// do to the page is the page's (run_detail.js): `on` = {series(replay), event(event, logs),
// live(event), applied(logs), historyArrived(), status(text)}.
import { openSocket } from "../workbench/socket.js";

export class RunStream {
  constructor(path, on) {
    this.path = path;
    this.on = on;
    this.lastSeq = 0;
    this.waiting = true; // a replay is on its way: live events wait in `held`
    this.held = [];
    this.replays = 0;
    this.gaps = 0;
  }

  connect() {
    // The first time, the socket the page's head opened (and asked {"since": 0} on) if it lives;
    // its messages so far are handed over, and the stream keeps its own from here on.
    const early = window.earlyRunSocket;
    window.earlyRunSocket = null;
    if (early) early.socket.removeEventListener("message", early.onMessage);
    this.connection = openSocket(this.path, {
      adopt: early,
      since: () => this.lastSeq, // sent on every (re)connect: the replay brings what was missed
      onOpen: () => {
        performance.mark("socket-open");
        this.waiting = true;
        this.on.status(this.lastSeq ? "catching up…" : "loading…");
      },
      onMessage: (message) => {
        if (this.waiting) performance.mark("replay-received");
        this.receive(message);
      },
      keepTrying: (closed) => closed.code !== 4404,
      onClose: (closed) => {
        if (closed.code === 4404) {
          this.on.status("this run was deleted");
          return;
        }
        this.on.status("reconnecting…");
        this.waiting = true;
      },
    });
    this.adoptedEarlySocket = this.connection.adopted;
  }

  // The socket now in use (a reconnect replaces it).
  get socket() {
    return this.connection.socket;
  }

  requestReplay() {
    this.waiting = true;
    this.on.status(this.lastSeq ? "catching up…" : "loading…");
    this.connection.catchUp();
  }

  receive(message) {
    if (message.type === "replay") this.applyReplay(message);
    else if (message.type === "events") {
      if (this.waiting) this.held.push(...message.events);
      else this.applyLive(message.events);
    } else if (message.type === "error") this.on.status(message.message);
  }

  applyReplay(replay) {
    performance.mark("replay-parsed");
    this.replays += 1;
    const logs = [];
    this.on.series(replay);
    for (const event of replay.events) if (event.seq > this.lastSeq) this.on.event(event, logs);
    this.lastSeq = Math.max(this.lastSeq, replay.last_seq);
    this.on.applied(logs);
    performance.mark("replay-applied");
    this.on.historyArrived();
    this.waiting = false;
    this.on.status(replay.downsampled ? "live (history downsampled; zoom in for detail)" : "live");
    const held = this.held;
    this.held = [];
    this.applyLive(held);
  }

  applyLive(events) {
    const logs = [];
    events.sort((a, b) => a.seq - b.seq);
    for (let i = 0; i < events.length; i += 1) {
      const event = events[i];
      if (event.seq <= this.lastSeq) continue; // already held
      if (event.seq > this.lastSeq + 1) {
        // Missed some (the channel layer drops for slow clients): ask, keep the rest.
        this.gaps += 1;
        this.held.push(...events.slice(i));
        this.requestReplay();
        break;
      }
      this.on.event(event, logs);
      this.on.live(event);
      this.lastSeq = event.seq;
    }
    this.on.applied(logs);
  }
}
