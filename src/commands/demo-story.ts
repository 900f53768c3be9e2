import { createWriteStream } from 'node:fs';
import { relative, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { GatewayConfig } from '../config/schema.js';
import { createLogger, type Logger } from '../core/logger.js';
import type { EmulatorHandle } from '../emulator/index.js';
import type { GatewayHandle } from '../runtime/gateway.js';
import { statusLine } from '../status/line.js';
import type { GatewayStatus } from '../status/model.js';
import type { PlantEvent } from '../sim/plant.js';
import { renderStatus } from './status.js';

/**
 * What the demo shows and does after everything started: the status view every few seconds, the
 * plant's scripted stop of Press 1, the downtime annotation the detector posts for it, and a short
 * outage of the tracking service that the gateway rides out and catches up on.
 *
 * On a terminal the view is redrawn in place (status above, what happened below) and the gateway's
 * log goes to a file, its warnings and errors also into the view. Otherwise (a pipe, a test, a
 * container log) every event and status is one line on stdout and the log is JSON on stderr.
 */

export interface StoryTimings {
  /** Press 1 stops this long after the plant started, for `downtimeMs`. */
  downtimeAfterMs: number;
  downtimeMs: number;
  /** The tracking service becomes unreachable this long after the start, for `outageMs`. */
  outageAfterMs: number;
  outageMs: number;
  /**
   * The gateway is stopped for `restartMs` this long after the start (and not before the outage
   * was caught up), while the plant keeps producing: Press 1's gap is read back from its OPC UA
   * server's history.
   */
  restartAfterMs: number;
  restartMs: number;
}

/** Press 1's downtime is recorded about a minute after the start, the outage caught up by about 80 s, the restart at 100 s. */
export const DEFAULT_TIMINGS: StoryTimings = { downtimeAfterMs: 40_000, downtimeMs: 20_000, outageAfterMs: 62_000, outageMs: 15_000, restartAfterMs: 100_000, restartMs: 12_000 };

/** The buffer is "back to the live tail" when nothing older than this waits in it. */
const LIVE_TAIL_AGE_S = 3;
const POLL_MS = 500;
const EVENTS_SHOWN = 14;

const clockTime = (ms: number) => new Date(ms).toLocaleTimeString('en-GB');
const count = (n: number) => Math.round(n).toLocaleString('en-US');
const seconds = (ms: number) => `${ms % 1000 === 0 || ms >= 10_000 ? Math.round(ms / 1000) : (ms / 1000).toFixed(1)} s`;

// ------------------------------------------------------------------------------------------ view

export interface DemoView {
  /** The lines shown above everything else (what runs where); `essential` when space is short. */
  setBanner(lines: string[], essential?: string[]): void;
  event(text: string, at?: number): void;
  status(s: GatewayStatus): void;
  /** Where a redraw between two status() calls gets a fresh status (so an event never sits under a stale one). */
  follow(source: () => GatewayStatus): void;
  /** A message after the view stops updating (shutdown). */
  final(text: string): void;
}

/** Redraws the whole view in place, like `top`: banner, operator status, recent events. */
class TerminalView implements DemoView {
  private banner: string[] = [];
  private essential: string[] = [];
  private readonly events: string[] = [];
  private last: GatewayStatus | null = null;
  private source: (() => GatewayStatus) | null = null;
  private stopped = false;

  constructor(private readonly out: NodeJS.WriteStream) {}

  setBanner(lines: string[], essential = lines.slice(0, 1)): void {
    this.banner = lines;
    this.essential = essential;
    this.draw();
  }

  event(text: string, at = Date.now()): void {
    this.events.push(`  [${clockTime(at)}] ${text}`);
    if (this.events.length > EVENTS_SHOWN) this.events.shift();
    this.draw();
  }

  status(s: GatewayStatus): void {
    this.last = s;
    this.draw(false);
  }

  follow(source: () => GatewayStatus): void {
    this.source = source;
  }

  final(text: string): void {
    if (!this.stopped) {
      this.stopped = true;
      this.out.write('\n');
    }
    this.out.write(`${text}\n`);
  }

  private draw(refresh = true): void {
    if (this.stopped) return;
    try {
      if (refresh && this.source) this.last = this.source();
    } catch {
      /* the gateway is stopping: keep the last status */
    }
    // Home, each line cleared to its end, then everything below cleared: no flicker, no scrolling.
    this.out.write(`\x1b[H${this.fit().map((l) => `${l}\x1b[K`).join('\n')}\n\x1b[J`);
  }

  /**
   * The view cut to the terminal: a view taller than the window would scroll and the next redraw
   * would land in the wrong place. Gives up, in this order, the banner's details, the status
   * details (keeping the one-line summary) and the oldest events.
   */
  private fit(): string[] {
    const rows = Math.max(10, (this.out.rows ?? 50) - 1);
    const cols = Math.max(20, this.out.columns ?? 120);
    const height = (lines: string[]) => lines.reduce((n, l) => n + Math.max(1, Math.ceil(l.length / cols)), 0);
    const events = this.events.length ? this.events : ['  (nothing yet)'];
    const detailed = this.last ? renderStatus(this.last).trimEnd().split('\n') : ['(status in a few seconds)'];
    const summary = this.last ? [statusLine(this.last)] : detailed;
    const layouts = [
      [this.banner, detailed],
      [this.essential, detailed],
      [this.essential, summary],
    ];
    const minEvents = Math.min(events.length, 6);
    for (let i = 0; ; i++) {
      const [banner, status] = layouts[i];
      const top = [...banner, '', ...status, '', 'WHAT HAPPENED'];
      const shown = [...events];
      while (shown.length > 1 && height([...top, ...shown]) > rows) shown.shift();
      const fits = height([...top, ...shown]) <= rows && shown.length >= minEvents;
      if (fits || i === layouts.length - 1) return [...top, ...shown];
    }
  }
}

/** One line per event and per status, for pipes, tests and container logs. */
class LineView implements DemoView {
  constructor(private readonly out: NodeJS.WritableStream) {}

  setBanner(lines: string[]): void {
    this.out.write(`${lines.join('\n')}\n\n`);
  }

  event(text: string, at = Date.now()): void {
    this.out.write(`[${clockTime(at)}] ${text}\n`);
  }

  status(s: GatewayStatus): void {
    this.out.write(`[${clockTime(Date.now())}] status: ${statusLine(s)}\n`);
  }

  follow(): void {
    /* a line, once written, stays as it was */
  }

  final(text: string): void {
    this.out.write(`${text}\n`);
  }
}

/**
 * What runs where: the view's first lines, and the essential ones (title and addresses) for a
 * small terminal. `logFile` when the log goes to a file (terminal).
 */
export function demoBanner(o: { plant: string[]; serviceUrl: string; gatewayUrl: string | null; console?: boolean; configFile?: string; logFile: string | null }): { lines: string[]; essential: string[] } {
  const inspect = o.serviceUrl.replace(/\/tracking\/v1$/, '');
  const near = (file: string) => {
    const r = relative(process.cwd(), file);
    return r && !r.startsWith('..') ? r : resolve(file);
  };
  const title = 'Edge gateway demo: a simulated plant, the tracking-service emulator and the gateway, all on this machine. Ctrl-C stops everything.';
  const addresses = [
    `  service   ${o.serviceUrl}  (the emulator; what it stored: ${inspect}/_emulator/stats)`,
    // The console is where commissioning happens; its address comes first.
    ...(o.gatewayUrl && o.console !== false ? [`  console   ${o.gatewayUrl}/console/  (commissioning console: live values, configuration, device switches)`] : []),
    ...(o.gatewayUrl ? [`  gateway   ${o.gatewayUrl}/  (operator page; ${o.gatewayUrl}/status, ${o.gatewayUrl}/metrics)`] : []),
  ];
  return {
    lines: [
      title,
      ...o.plant.map((line, i) => `  ${i === 0 ? 'plant  ' : '       '}  ${line}`),
      ...addresses,
      ...(o.configFile ? [`  config    ${near(o.configFile)}  (kept between starts; edit it in the console, or: edge-gateway demo device press1 down|up)`] : []),
      ...(o.logFile === null ? [] : [`  log       ${near(o.logFile)}`]),
    ],
    essential: [title, ...addresses],
  };
}

export function createDemoView(): DemoView {
  if (process.stdout.isTTY) {
    process.stdout.write('\x1b[2J');
    return new TerminalView(process.stdout);
  }
  return new LineView(process.stdout);
}

/**
 * The gateway's logger for the demo. On a terminal the full log goes to `logFile` (pino JSON, as in
 * production) and warnings and errors also appear in the view, so the redrawn screen stays
 * readable; otherwise JSON lines go to stderr. Redaction is createLogger's.
 */
export function createDemoLogger(config: GatewayConfig, view: DemoView, logFile: string): Logger {
  if (!process.stdout.isTTY) return createLogger({ level: config.log.level, format: 'json', name: config.gateway.name, destination: pino.destination({ fd: 2, sync: true }) });
  const toView = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue;
        try {
          const entry = JSON.parse(line) as { level?: string; msg?: string; source?: string; component?: string };
          const who = entry.source ?? entry.component;
          view.event(`${entry.level === 'error' || entry.level === 'fatal' ? 'ERROR' : 'warning'}${who ? ` (${who})` : ''}: ${entry.msg ?? ''}`);
        } catch {
          /* not one of our JSON lines: the file has it */
        }
      }
      done();
    },
  });
  const destination = pino.multistream([
    { level: config.log.level as pino.Level, stream: createWriteStream(logFile, { flags: 'a' }) },
    { level: 'warn', stream: toView },
  ]);
  return createLogger({ level: config.log.level, format: 'json', name: config.gateway.name, destination });
}

// ----------------------------------------------------------------------------------------- story

export interface StoryOptions {
  view: DemoView;
  emulator: EmulatorHandle;
  gateway: GatewayHandle;
  timings: StoryTimings;
  /** When the plant (and so Press 1's script) started. */
  plantStartedAt: number;
  /** Stops the gateway, waits `downMs`, starts it again on the same buffer; the new handle. Absent: no restart in the story. */
  restart?: (downMs: number) => Promise<GatewayHandle>;
}

export interface DemoStory {
  showStatus(): void;
  stop(): void;
}

/** The view's line for an event of the simulated plant. */
export function plantEventText(event: PlantEvent): string {
  switch (event.kind) {
    case 'press_stopped':
      return 'Press 1 stopped (scripted stop in the simulated plant); its machine state is now 0';
    case 'press_running':
      return `Press 1 running again after ${seconds(event.stoppedMs)}; the downtime detector turns the stop into a range annotation`;
    case 'alarm_raised':
      return `Press 1's OPC UA server raises the alarm ${event.alarm} (${event.type}, severity ${event.severity}); the gateway opens a downtime range for it`;
    case 'alarm_cleared':
      return `Press 1's OPC UA server clears the alarm ${event.alarm}; its range annotation is queued with the server's times`;
  }
}

type OutagePhase =
  | { kind: 'waiting' }
  | { kind: 'down'; startedAt: number; peak: number }
  | { kind: 'catching_up'; startedAt: number; endedAt: number; peak: number }
  | { kind: 'done' };

export function startDemoStory(o: StoryOptions): DemoStory {
  const { view, emulator, timings } = o;
  let gateway = o.gateway;
  const startedAt = Date.now();
  view.follow(() => gateway.status());
  const detector = gateway.config.annotations?.detectors.find((d) => d.variable === 'mvr_press1_state');
  const minDowntime = detector ? ` (the gateway records stops of ${seconds(detector.min_duration)} or more)` : '';
  view.event(
    `script: Press 1 stops at ${clockTime(o.plantStartedAt + timings.downtimeAfterMs)} for ${seconds(timings.downtimeMs)}${minDowntime}${gateway.config.annotations?.alarms ? ', raising a jam and an overtemperature alarm' : ''}; ` +
      `the tracking service is unreachable from ${clockTime(startedAt + timings.outageAfterMs)} for ${seconds(timings.outageMs)}` +
      (o.restart ? `; the gateway restarts at ${clockTime(startedAt + timings.restartAfterMs)} (down ${seconds(timings.restartMs)})` : ''),
  );

  const seen = new Set(emulator.annotations().map((a) => a.id));
  let outage: OutagePhase = { kind: 'waiting' };

  const reportAnnotations = () => {
    for (const a of emulator.annotations()) {
      if (seen.has(a.id)) continue;
      seen.add(a.id);
      if (a.type === 'range' && a.started_at && a.ended_at) {
        const from = Date.parse(a.started_at);
        const to = Date.parse(a.ended_at);
        // Who made it: the gateway's outbox knows (alarm annotations beside the detector's).
        const origin = gateway.annotations?.store.byExternalId(a.external_id ?? '')?.origin;
        const what = origin === 'alarm' ? 'alarm annotation' : origin === 'gap' || a.text.startsWith('No data from') ? 'gap annotation' : 'downtime annotation';
        view.event(`${what} stored upstream: "${a.text}" ${clockTime(from)}–${clockTime(to)} (${seconds(to - from)})`);
      } else {
        const origin = gateway.annotations?.store.byExternalId(a.external_id ?? '')?.origin;
        view.event(`${origin === 'alarm' ? 'alarm annotation' : 'annotation'} stored upstream: "${a.text}"${a.occurred_at ? ` at ${clockTime(Date.parse(a.occurred_at))}` : ''}`);
      }
    }
  };

  /** Values the service holds whose timestamps fall in [from, to]: what was buffered and delivered late. */
  const storedBetween = (from: number, to: number) => {
    let n = 0;
    for (const variable of Object.keys(emulator.valueCounts())) {
      for (const v of emulator.values(variable)) {
        const ts = Date.parse(v.timestamp);
        if (ts >= from && ts <= to) n += 1;
      }
    }
    return n;
  };

  const followOutage = () => {
    const now = Date.now();
    if (outage.kind === 'waiting' && now - startedAt >= timings.outageAfterMs) {
      emulator.setFaults({ outage_seconds: timings.outageMs / 1000 });
      outage = { kind: 'down', startedAt: now, peak: 0 };
      view.event(`outage: the tracking service is unreachable for ${seconds(timings.outageMs)} (injected in the emulator); the gateway keeps every sample in its buffer and retries`);
      return;
    }
    if (outage.kind === 'waiting' || outage.kind === 'done') return;
    const s = gateway.status();
    outage.peak = Math.max(outage.peak, s.buffer.samples);
    if (outage.kind === 'down' && emulator.faults().outage_seconds === 0) {
      outage = { kind: 'catching_up', startedAt: outage.startedAt, endedAt: now, peak: outage.peak };
      view.event(`the tracking service is reachable again; ${count(s.buffer.samples)} samples wait in the buffer (oldest ${(s.buffer.oldest_unsent_age_s ?? 0).toFixed(0)} s)`);
      return;
    }
    if (outage.kind === 'catching_up') {
      const tailOnly = s.buffer.samples === 0 || (s.buffer.oldest_unsent_age_s ?? 0) <= LIVE_TAIL_AGE_S;
      if (!tailOnly || s.uplink.condition !== 'ok') return;
      const late = storedBetween(outage.startedAt, outage.endedAt);
      view.event(
        `backlog caught up ${seconds(now - outage.endedAt)} after the service came back: the buffer is back to the live tail (${count(s.buffer.samples)} samples); ` +
          `peak backlog ${count(outage.peak)}, and the service now holds ${count(late)} values time-stamped during the outage`,
      );
      outage = { kind: 'done' };
    }
  };

  // --- the restart: stop, the plant keeps producing, start, Press 1's gap read from history
  let restart: { kind: 'waiting' } | { kind: 'restarting' } | { kind: 'filling'; since: number; reported: Set<number> } | { kind: 'done' } = { kind: 'waiting' };
  const followRestart = () => {
    if (!o.restart || restart.kind === 'done' || restart.kind === 'restarting') return;
    if (restart.kind === 'waiting') {
      if (Date.now() - startedAt < timings.restartAfterMs || outage.kind !== 'done') return;
      restart = { kind: 'restarting' };
      view.event(`restart: the gateway stops for ${seconds(timings.restartMs)} (an update, a power cut) while the plant keeps producing; Press 1's OPC UA server keeps the history of its values`);
      o.restart(timings.restartMs).then(
        (next) => {
          gateway = next;
          view.follow(() => gateway.status());
          view.event('the gateway runs again: it records the interval it was stopped as a gap per source and reads Press 1\'s gap back from the server\'s history (HistoryRead)');
          restart = { kind: 'filling', since: Date.now(), reported: new Set() };
        },
        (err: unknown) => {
          view.event(`the gateway could not be started again: ${(err as Error).message}`);
          restart = { kind: 'done' };
        },
      );
      return;
    }
    // filling: report each gateway_stopped gap once history has decided about it.
    for (const g of gateway.gaps.list({ state: 'all', limit: 20 })) {
      if (g.reason !== 'gateway_stopped' || g.to === null || g.filled === 'pending' || restart.reported.has(g.id)) continue;
      restart.reported.add(g.id);
      const span = `${clockTime(g.from)}–${clockTime(g.to)} (${seconds(g.to - g.from)})`;
      view.event(
        g.filled === 'yes' || g.filled === 'partial'
          ? `gap of ${g.source} ${span} filled from the OPC UA server's history: ${count(g.filledValues)} values read back${g.filled === 'partial' ? ` (partly: ${g.note ?? ''})` : ''}`
          : `gap of ${g.source} ${span} recorded (no history to read it from; edge-gateway gaps list shows it)`,
      );
    }
    if (Date.now() - restart.since > 60_000) restart = { kind: 'done' };
  };

  const timer = setInterval(() => {
    try {
      reportAnnotations();
      followOutage();
      followRestart();
    } catch (err) {
      gateway.logger.warn({ err: String(err) }, 'demo story step failed');
    }
  }, POLL_MS);
  timer.unref();

  return {
    showStatus: () => view.status(gateway.status()),
    stop: () => clearInterval(timer),
  };
}
