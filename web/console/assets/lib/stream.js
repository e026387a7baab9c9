// One shared live-update stream for the whole console: an EventSource on
// /api/v1/stream ("task" and "event" events), reconnecting with backoff.
// While the stream cannot be opened at all, running tasks are polled instead
// so progress bars still move.

export class Stream {
  constructor(api) {
    this.api = api;
    this.taskSubs = new Set();
    this.eventSubs = new Set();
    this.es = null;
    this.backoff = 1000;
    this.timer = 0;
    this.pollTimer = 0;
    this.opened = false;
    this.stopped = true;
    this.lastPoll = new Map();
  }

  // subscribe(onTask, onEvent) -> unsubscribe. Either callback may be null.
  subscribe(onTask, onEvent) {
    const t = onTask ? (x) => onTask(x) : null;
    const e = onEvent ? (x) => onEvent(x) : null;
    if (t) this.taskSubs.add(t);
    if (e) this.eventSubs.add(e);
    this.start();
    return () => {
      if (t) this.taskSubs.delete(t);
      if (e) this.eventSubs.delete(e);
    };
  }

  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.pollTimer);
    this.pollTimer = 0;
    this.opened = false;
    this.lastPoll.clear();
    if (this.es) { this.es.close(); this.es = null; }
  }

  emitTask(task) {
    for (const f of [...this.taskSubs]) {
      try { f(task); } catch (err) { console.error("task listener failed", err); }
    }
  }

  emitEvent(ev) {
    for (const f of [...this.eventSubs]) {
      try { f(ev); } catch (err) { console.error("event listener failed", err); }
    }
  }

  connect() {
    if (this.stopped) return;
    const es = new EventSource("/api/v1/stream", { withCredentials: true });
    this.es = es;
    es.addEventListener("open", () => {
      const reconnected = this.opened;
      this.opened = true;
      this.backoff = 1000;
      clearTimeout(this.pollTimer);
      this.pollTimer = 0;
      // Updates sent while we were away are lost: catch up once.
      if (reconnected) this.fetchTasks(40);
    });
    es.addEventListener("task", (m) => {
      let t;
      try { t = JSON.parse(m.data); } catch { return; }
      this.emitTask(t);
    });
    es.addEventListener("event", (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch { return; }
      this.emitEvent(ev);
    });
    es.addEventListener("error", () => {
      // The browser retries on its own only while the response was a stream;
      // we take over so that a 401/404/503 backs off instead of hammering.
      es.close();
      if (this.es === es) this.es = null;
      if (this.stopped) return;
      if (!this.pollTimer) this.poll();
      this.timer = setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 30000);
    });
  }

  async poll() {
    this.pollTimer = setTimeout(() => this.poll(), 2000);
    await this.fetchTasks(50);
  }

  // fetchTasks emits the recent tasks that changed since it last looked.
  async fetchTasks(limit) {
    if (this.stopped || !this.taskSubs.size) return;
    let tasks;
    try {
      // Not quiet: a 401 here is how an idle console notices its session expired.
      tasks = await this.api.call("GET", `/tasks?limit=${limit}`);
    } catch { return; }
    if (!Array.isArray(tasks)) return;
    for (const t of tasks) {
      const key = JSON.stringify(t);
      if (this.lastPoll.get(t.id) === key) continue;
      this.lastPoll.set(t.id, key);
      this.emitTask(t);
    }
  }
}
