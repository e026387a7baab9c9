// One shared live-update stream for the whole console: an EventSource on
// /api/v1/stream ("task", "event" and "scheduler" events), reconnecting with
// backoff.
// While the stream cannot be opened at all, running tasks are polled instead
// so progress bars still move.

export class Stream {
  constructor(api) {
    this.api = api;
    this.taskSubs = new Set();
    this.eventSubs = new Set();
    this.schedSubs = new Set();
    this.lastSched = null;
    this.es = null;
    this.backoff = 1000;
    this.timer = 0;
    this.pollTimer = 0;
    this.opened = false;
    this.stopped = true;
    this.lastPoll = new Map();
  }

  // subscribe(onTask, onEvent, onScheduler) -> unsubscribe. Any callback
  // may be null. The first argument may instead be an options object
  // {task, event, scheduler}. A new scheduler subscriber gets the last
  // scheduler status at once (the server sends one only on a change).
  subscribe(onTask, onEvent, onScheduler) {
    if (onTask && typeof onTask === "object") {
      ({ task: onTask = null, event: onEvent = null, scheduler: onScheduler = null } = onTask);
    }
    const t = onTask ? (x) => onTask(x) : null;
    const e = onEvent ? (x) => onEvent(x) : null;
    const s = onScheduler ? (x) => onScheduler(x) : null;
    if (t) this.taskSubs.add(t);
    if (e) this.eventSubs.add(e);
    if (s) {
      this.schedSubs.add(s);
      if (this.lastSched) {
        const last = this.lastSched;
        queueMicrotask(() => {
          if (this.schedSubs.has(s)) this.call(s, last, "scheduler");
        });
      }
    }
    this.start();
    return () => {
      if (t) this.taskSubs.delete(t);
      if (e) this.eventSubs.delete(e);
      if (s) this.schedSubs.delete(s);
    };
  }

  call(f, x, what) {
    try { f(x); } catch (err) { console.error(`${what} listener failed`, err); }
  }

  emitScheduler(st) {
    this.lastSched = st;
    for (const f of [...this.schedSubs]) this.call(f, st, "scheduler");
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
    this.lastSched = null;
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
    es.addEventListener("scheduler", (m) => {
      let st;
      try { st = JSON.parse(m.data); } catch { return; }
      this.emitScheduler(st);
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
