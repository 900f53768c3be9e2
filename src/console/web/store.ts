// The console's state: the gateway status and every variable, kept current by the live stream.
import { options } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { GatewayStatus, LiveTick } from '../api/live.js';
import type { VariableRow, VariablesResponse } from '../api/variables.js';
import { api, messageOf, naturalCompare } from './lib.js';
import { connectLive, type LinkState } from './live.js';

const SPARK = 30;

/** A row of the Variables page: the list's row, kept current by the ticks. */
export interface LiveVariable extends VariableRow {
  /** Bucket number (ts / bucket_ms) of the newest sparkline point. */
  sparkB: number | null;
  /** Samples per second, smoothed over the ticks. */
  ewma: number;
}

export interface ConsoleStore {
  boot: string | null;
  status: GatewayStatus | null;
  live: LinkState;
  /** When the stream was lost (epoch ms of this browser), null while live. */
  lostSince: number | null;
  vars: LiveVariable[] | null;
  byIdx: Map<number, LiveVariable>;
  byId: Map<string, LiveVariable>;
  bucketMs: number;
  varsError: string | null;
  /** Ticks applied, and what drawing each update cost (ms): read by the frame-budget test (window.__console). */
  ticks: number;
  tickMs: number[];
}

declare global {
  interface Window {
    __console?: ConsoleStore;
    /** When the variable rows were first on screen (ms since navigation), for the first-render test. */
    __firstRowsMs?: number;
  }
}

const listeners = new Set<() => void>();
export const store: ConsoleStore = { boot: null, status: null, live: 'connecting', lostSince: null, vars: null, byIdx: new Map(), byId: new Map(), bucketMs: 5000, varsError: null, ticks: 0, tickMs: [] };
let queued = false;
let measuring = false;
// What drawing a live update costs the page (state change to DOM patched), kept for the
// frame-budget test (window.__console.tickMs): Preact renders queued components in one batch.
const defer = options.debounceRendering ?? ((cb: () => void) => Promise.resolve().then(cb));
options.debounceRendering = (cb) =>
  defer(() => {
    const t0 = measuring ? performance.now() : 0;
    cb();
    if (measuring) {
      measuring = false;
      store.tickMs.push(performance.now() - t0);
      if (store.tickMs.length > 600) store.tickMs.shift();
    }
  });

export function notify(): void {
  if (queued) return;
  queued = true;
  requestAnimationFrame(() => {
    queued = false;
    measuring = true;
    for (const l of listeners) l();
  });
}

export function useStore(): ConsoleStore {
  const [, force] = useState(0);
  useEffect(() => {
    const l = () => force((x) => x + 1);
    listeners.add(l);
    return () => {
      listeners.delete(l);
    };
  }, []);
  return store;
}

let loading: Promise<void> | null = null;
let machinesRetried = false;
export function loadVariables(): Promise<void> {
  if (loading) return loading;
  loading = (async () => {
    try {
      const r = await api<VariablesResponse>('/console/api/variables');
      store.bucketMs = r.bucket_ms;
      const vars: LiveVariable[] = r.variables.map((v) => ({ ...v, sparkB: v.ts ? Math.floor(v.ts / r.bucket_ms) : null, ewma: v.rate }));
      vars.sort((a, b) => naturalCompare(a.source ?? '~', b.source ?? '~') || naturalCompare(a.id, b.id));
      store.vars = vars;
      store.byIdx = new Map(vars.filter((v) => v.idx >= 0).map((v) => [v.idx, v]));
      store.byId = new Map(vars.map((v) => [v.id, v]));
      store.varsError = null;
      if (r.boot !== store.boot && store.boot === null) store.boot = r.boot;
      // Machine names come from the organisation's catalog, which the gateway starts reading on
      // the first list: ask once more when it has had time to answer.
      if (!machinesRetried && vars.some((v) => v.machine === null)) {
        machinesRetried = true;
        setTimeout(loadVariables, 4000);
      }
    } catch (err) {
      store.varsError = messageOf(err);
    } finally {
      loading = null;
      notify();
    }
  })();
  return loading;
}

let reloadTimer: ReturnType<typeof setTimeout> | null = null;
function reloadSoon(): void {
  if (reloadTimer) return;
  reloadTimer = setTimeout(() => {
    reloadTimer = null;
    void loadVariables();
  }, 2000);
}

function applyTick(msg: LiveTick): void {
  store.ticks += 1;
  store.status = msg.status;
  if (!store.vars) return;
  const bms = store.bucketMs;
  let unknown = false;
  for (const [idx, value, ts, n] of msg.v) {
    const r = store.byIdx.get(idx);
    if (!r) {
      unknown = true;
      continue;
    }
    r.value = value;
    r.ts = ts;
    r.ewma = r.ewma * 0.8 + n * 0.2;
    r.rate = r.ewma;
    if (r.delivery === 'none') r.delivery = 'queued';
    const b = Math.floor(ts / bms);
    if (r.sparkB === null || b > r.sparkB) {
      const gap = r.sparkB === null ? 1 : Math.min(SPARK, b - r.sparkB);
      for (let i = 1; i < gap; i++) r.spark.push(null);
      r.spark.push(value);
      if (r.spark.length > SPARK) r.spark.splice(0, r.spark.length - SPARK);
      r.sparkB = b;
    } else if (b === r.sparkB) {
      r.spark[r.spark.length - 1] = value;
    }
  }
  for (const [id, byReason] of msg.r ?? []) {
    const r = store.byId.get(id);
    if (r) r.refused = byReason;
    else unknown = true;
  }
  // A stored quality that changed (the link overlay comes with the status: page quality.ts).
  for (const [id, quality, since] of msg.q ?? []) {
    const r = store.byId.get(id);
    if (r) Object.assign(r, { quality, quality_since: since });
    else unknown = true;
  }
  // Delivery state: everything older than the oldest sample still queued has been sent (the queue
  // is sent oldest first).
  const age = msg.status?.buffer?.oldest_unsent_age_s;
  if (age !== undefined) {
    const oldest = age === null ? Infinity : msg.t - age * 1000;
    for (const r of store.vars) if (r.ts !== null && r.delivery !== 'set_aside') r.delivery = r.ts < oldest ? 'delivered' : 'queued';
  }
  // Rows that got nothing this tick decay towards 0 /s.
  if (msg.v.length < store.vars.length) {
    const seen = new Set(msg.v.map((x) => x[0]));
    for (const r of store.vars)
      if (r.idx >= 0 && !seen.has(r.idx)) {
        r.ewma *= 0.8;
        r.rate = r.ewma;
      }
  }
  if (unknown) reloadSoon();
}

export function startLive(): void {
  window.__console = store;
  connectLive({
    onHello: (m) => {
      // A new boot id: the gateway restarted and the variable indexes changed.
      if (store.boot !== null && m.boot !== store.boot) {
        store.boot = m.boot;
        void loadVariables();
      }
      store.boot = m.boot;
    },
    onTick: (m) => {
      applyTick(m);
      notify();
    },
    onState: (s) => {
      store.live = s;
      if (s === 'lost' && store.lostSince === null) store.lostSince = Date.now();
      if (s === 'live') store.lostSince = null;
      notify();
    },
  });
}
