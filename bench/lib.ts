/** Small helpers shared by the benchmarks: tables, ratios, RSS sampling, timing. */
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

export const NOISY_MACHINE_NOTE =
  'Note: shared machines are noisy (other processes compete for CPU and disk). Compare the ratio, not the absolute figures, and run twice before trusting a small difference.';

// ---------------------------------------------------------------- smoke runs (BENCH_SMOKE=1)

/**
 * BENCH_SMOKE=1: the test suite's smoke run (test/bench/) runs every benchmark once at its smallest
 * meaningful sizes, to prove that it still runs and prints its table, ratio and verdicts. Figures
 * from a run that small mean nothing (no warm-up to speak of, no load): never quote them.
 */
export const SMOKE = process.env.BENCH_SMOKE === '1';

/** How a smoke run's first line starts; the smoke test looks for it as the sign that the bench honours BENCH_SMOKE. */
export const SMOKE_BANNER = 'BENCH_SMOKE=1: smallest sizes';

/**
 * A number from the environment variable `name`: its value when set, else `smoke` under
 * BENCH_SMOKE=1, else `normal`. A variable given by hand wins over both, so a smoke run can still
 * be resized. A value that is not a number stops the bench with the variable's name.
 */
export function envNumber(name: string, normal: number, smoke: number = normal): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return SMOKE ? smoke : normal;
  const n = Number(raw);
  if (!Number.isFinite(n)) throw new Error(`${name}=${JSON.stringify(raw)}: not a number`);
  return n;
}

/** A comma-separated list from the environment variable `name`, with the same precedence as envNumber. */
export function envList(name: string, normal: string, smoke: string = normal): string[] {
  const raw = process.env[name];
  const text = raw === undefined || raw.trim() === '' ? (SMOKE ? smoke : normal) : raw;
  return text.split(',').map((s) => s.trim()).filter(Boolean);
}

/** Under BENCH_SMOKE=1, prints the banner with the sizes the bench picked (`sizes`: "BENCH_SAMPLES 20,000, ..."). */
export function smokeBanner(sizes: string): void {
  if (SMOKE) console.log(`${SMOKE_BANNER} ${sizes}. The figures below only show that the bench runs; they are not measurements.\n`);
}

/** Exit code of a bench that cannot run here for want of a peer: the smoke test skips it with a notice (fails under CI). */
export const PEER_MISSING_EXIT = 77;

/** Stops the bench with PEER_MISSING_EXIT and a SKIPPED line when `available` is false (`what`: the peer and how to get it). */
export function requirePeer(available: boolean, what: string): void {
  if (available) return;
  console.log(`SKIPPED: ${what}`);
  process.exit(PEER_MISSING_EXIT);
}

/** a / b as text; a baseline too small to divide by (an idle side at a smoke size) says so instead of "Infinity". */
export function ratioText(a: number, b: number, digits = 2): string {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b <= 0) return 'n/a (baseline ~0)';
  return (a / b).toFixed(digits);
}

export function table(rows: Array<Record<string, string | number>>): string {
  const cols = Object.keys(rows[0] ?? {});
  const cell = (v: string | number) => (typeof v === 'number' ? (Number.isInteger(v) ? v.toLocaleString('en-US') : v.toLocaleString('en-US', { maximumFractionDigits: 2 })) : v);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(cell(r[c])).length)));
  const line = (vals: string[]) => `| ${vals.map((v, i) => v.padEnd(widths[i])).join(' | ')} |`;
  return [line(cols), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map((r) => line(cols.map((c) => String(cell(r[c])))))].join('\n');
}

/** Resident set size of a process in bytes (from /proc, so it works for children too). */
export function rssOf(pid: number = process.pid): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /VmRSS:\s+(\d+) kB/.exec(status);
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * Samples RSS every `intervalMs` until stopped; returns the peak and the samples. `pid` may be a
 * function: a process restarted meanwhile is followed (a dead one reads 0 and is not sampled).
 */
export function rssSampler(pid: number | (() => number) = process.pid, intervalMs = 100) {
  const pidNow = typeof pid === 'function' ? pid : () => pid;
  let peak = rssOf(pidNow());
  const samples: number[] = [];
  const timer = setInterval(() => {
    const v = rssOf(pidNow());
    if (v === 0) return;
    samples.push(v);
    if (v > peak) peak = v;
  }, intervalMs);
  return {
    stop(): { peak: number; samples: number[] } {
      clearInterval(timer);
      return { peak, samples };
    },
    get peak() {
      return peak;
    },
  };
}

/** CPU seconds used by a process (user + system), from /proc. */
export function cpuSecondsOf(pid: number = process.pid): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return ticks / 100;
  } catch {
    return 0;
  }
}

export const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;

export function verdict(ok: boolean, text: string): string {
  return `${ok ? 'PASS' : 'FAIL'}  ${text}`;
}

// ---------------------------------------------------------------- processes for end-to-end benches

import { spawn, type ChildProcess } from 'node:child_process';
import { createConnection, createServer } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { createWriteStream, existsSync, writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import { request as undiciRequest, type Dispatcher } from 'undici';

export const ROOT = join(import.meta.dirname, '..');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export interface Proc {
  child: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Runs `edge-gateway <args>` in a child process; resolves once `readyText` is printed. Uses the
 * compiled dist/cli.js when it exists (what users run; the tsx loader would add its own thread and
 * memory to the figures), else the TypeScript sources through tsx.
 */
export async function startCli(args: string[], readyText: RegExp, env: Record<string, string> = {}, nodeArgs: string[] = []): Promise<Proc> {
  const useDist = existsSync(join(ROOT, 'dist', 'cli.js')) && process.env.BENCH_FROM_SOURCES !== '1';
  const argv = [...nodeArgs, ...(useDist ? [join(ROOT, 'dist', 'cli.js'), ...args] : ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), ...args])];
  // Launched as the container image launches it (NODE_OPTIONS there: a small young generation).
  const child = spawn(process.execPath, argv, { cwd: ROOT, env: { ...process.env, NODE_OPTIONS: `--max-semi-space-size=2 ${process.env.NODE_OPTIONS ?? ''}`.trim(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d;
      if (readyText.test(out)) {
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (d) => process.stderr.write(d));
    child.once('exit', (code) => reject(new Error(`edge-gateway ${args[0]} exited (${code}) before it was ready:\n${out.slice(-2000)}`)));
  });
  child.removeAllListeners('exit');
  // BENCH_GATEWAY_LOG=<file>: keep the process's log lines (JSON) for a timeline of a run.
  if (process.env.BENCH_GATEWAY_LOG) {
    const log = createWriteStream(process.env.BENCH_GATEWAY_LOG, { flags: 'a' });
    log.write(out);
    child.stdout!.pipe(log);
  }
  const exit = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child,
    stop: async (signal: NodeJS.Signals = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exit;
    },
  };
}

/** The emulator in its own process, so its memory and CPU are not the gateway's. */
export async function startEmulatorProcess(opts: { port: number; rateLimit?: number; fixture?: unknown; jobDelayMs?: number; dir: string }): Promise<Proc & { base: string }> {
  const args = ['emulator', '--port', String(opts.port), '--rate-limit', String(opts.rateLimit ?? 1500), '--job-delay', String(opts.jobDelayMs ?? 200)];
  if (opts.fixture) {
    const file = join(opts.dir, 'fixture.json');
    writeFileSync(file, JSON.stringify(opts.fixture));
    args.push('--fixture', file);
  }
  const p = await startCli(args, /tracking\/v1/);
  return { ...p, base: `http://127.0.0.1:${opts.port}` };
}

/** A gateway in its own process with a config written from `config`; `nodeArgs` go to node itself (--cpu-prof is not allowed in NODE_OPTIONS). */
export async function startGatewayProcess(config: Record<string, unknown>, dir: string, nodeArgs: string[] = []): Promise<Proc> {
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, stringify(config));
  return startCli(['run', '--config', file], /gateway started/, {}, nodeArgs);
}

/** Resolves once something listens on 127.0.0.1:`port` (20 s at most). */
export async function waitForPort(port: number, what = 'the server'): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const ok = await new Promise<boolean>((r) => {
      const s = createConnection(port, '127.0.0.1');
      s.once('connect', () => (s.destroy(), r(true)));
      s.once('error', () => r(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} did not listen on ${port}`);
}

/**
 * mosquitto in its own process, on a free port; the in-flight window raised so QoS 1 at 1,000
 * msg/s is not held to 20 per round trip, and a session may queue 100,000 messages. `keepLog`:
 * its errors, warnings and notices go to `<dir>/mosquitto.log` ("Outgoing messages are being
 * dropped for client ..." is how it says a session's queue overflowed).
 */
/** Where Debian installs mosquitto (apt-get install mosquitto). */
export const MOSQUITTO = '/usr/sbin/mosquitto';

export async function startMosquitto(dir: string, o: { keepLog?: boolean } = {}): Promise<{ url: string; log: string | null; pid: number; stop(): Promise<void> }> {
  const port = await freePort();
  const conf = join(dir, 'mosquitto.conf');
  const log = join(dir, 'mosquitto.log');
  const logging = o.keepLog ? [`log_dest file ${log}`, 'log_type error', 'log_type warning', 'log_type notice'] : ['log_dest none'];
  writeFileSync(conf, [`user ${userInfo().username}`, `listener ${port} 127.0.0.1`, 'allow_anonymous true', 'persistence false', 'max_queued_messages 100000', 'max_inflight_messages 1000', ...logging].join('\n') + '\n');
  const proc = spawn(MOSQUITTO, ['-c', conf], { stdio: 'ignore' });
  await waitForPort(port, 'mosquitto');
  return {
    url: `mqtt://127.0.0.1:${port}`,
    log: o.keepLog ? log : null,
    pid: proc.pid!,
    stop: () =>
      new Promise<void>((r) => {
        if (proc.exitCode !== null) return r();
        proc.once('exit', () => r());
        proc.kill('SIGTERM');
      }),
  };
}

export async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return (await res.json()) as T;
}

export async function postJson(url: string, body: unknown): Promise<void> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
}

/** The middle value (NaN for none). */
export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

/** How long `fn` took, and the longest the event loop could not run a timer meanwhile. */
export async function measureBlock(fn: () => unknown): Promise<{ totalMs: number; blockMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  // Let the histogram's timer start before the work.
  await new Promise((r) => setTimeout(r, 5));
  const t = performance.now();
  await fn();
  const totalMs = performance.now() - t;
  await new Promise((r) => setTimeout(r, 5));
  h.disable();
  // The delay beyond the 1 ms resolution is how long the loop could not run a timer.
  return { totalMs, blockMs: Math.max(0, h.max / 1e6 - 1) };
}

/** A token for the emulator's demo client, fetched once by a bare client (the baselines of the uplink benches). */
export async function demoToken(base: string, dispatcher: Dispatcher): Promise<string> {
  const res = await undiciRequest(`${base}/oauth2/token`, {
    method: 'POST',
    dispatcher,
    headers: { authorization: `Basic ${Buffer.from('demo-gateway:demo-secret').toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials&audience=com.service.tracking',
  });
  return ((await res.body.json()) as { access_token: string }).access_token;
}
