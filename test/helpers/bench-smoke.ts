import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Smoke runs of the benchmarks: every `bench/*.ts` that is a benchmark runs once with
 * BENCH_SMOKE=1 (its smallest meaningful sizes, bench/README.md "Smoke runs") and must print its
 * table, a ratio to its same-run baseline and, when it has targets, its verdict lines, with no
 * figure left NaN, null, undefined or infinite. Figures are not judged: the machine's speed
 * decides them, and a smoke run is too short to mean anything. A bench that cannot run for want
 * of a peer (mosquitto, open62541) exits with PEER_MISSING_EXIT: skipped with a notice, a
 * failure under CI.
 *
 * Benches are found by listing bench/, so a new one is smoke-run without anyone editing this file;
 * the modules of bench/ that are not benchmarks are listed below, each with what it is.
 */

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const BENCH_DIR = join(ROOT, 'bench');

/** The modules in bench/ that are not benchmarks (imported by them, never run on their own). */
export const NON_BENCH_MODULES: Readonly<Record<string, string>> = {
  'lib.ts': 'helpers of every bench: tables, verdicts, processes, BENCH_SMOKE sizes',
  'baseline-buffer.ts': 'the buffer before v3, taken from git: the baseline of buffer-footprint and commit-latency',
  'former-budget-sharing.ts': 'budget sharing as it was before fake peers were bounded: the baseline of fleet-budget',
  'former-uplink-health.ts': 'the uplink health as it was before outage recovery was reworked: the baseline of outage-recovery',
  'plant-corpus.ts': 'the plant-like sample generator (buffer-footprint, commit-latency, trend-flush)',
  'sensor-corpus.ts': 'the sensor-recording generator (buffer-footprint)',
  'corpora.ts': 'the corpora of the buffer benches and xz / zstd of their text forms (buffer-footprint, chunk-codec)',
  'real-recording.ts': 'a public real sensor recording shipped in an npm package (corpora.ts)',
  'prefill.ts': 'writes an old backlog into a buffer file (backlog-drain, memory, uplink-budget, fleet-budget)',
  'open62541.ts': 'the open62541 plant server, its value check and a bare node-opcua client (plant-scale, opcua-ingest, opcua-recovery)',
};

/** Kept in step with bench/lib.ts (which the test does not import: it would run bench code in the test process). */
export const SMOKE_BANNER = 'BENCH_SMOKE=1: smallest sizes';
export const PEER_MISSING_EXIT = 77;

/** Every benchmark in bench/, by file name, sorted. */
export function listBenches(): string[] {
  return readdirSync(BENCH_DIR)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !(f in NON_BENCH_MODULES))
    .sort();
}

/**
 * How long each smoke run took (wall seconds, measured beside other engineers' test runs at load
 * ~20 on 2 cores: only their proportions matter), to spread the benches over the smoke files
 * evenly; a bench not listed counts DEFAULT_COST_S. Wrong figures here cost time, never correctness.
 */
const COST_S: Readonly<Record<string, number>> = {
  'alarm-events.ts': 100,
  'backlog-drain.ts': 43,
  'buffer-footprint.ts': 45,
  'buffer-ingest.ts': 8,
  'chunk-codec.ts': 8,
  'commit-latency.ts': 15,
  'config-load.ts': 20,
  'console-config-check.ts': 12,
  'console-cost.ts': 35,
  'console-mapping-csv.ts': 16,
  'fleet-budget.ts': 70,
  'history-backfill.ts': 105,
  'history-read-1m.ts': 134,
  'hostile-inputs.ts': 22,
  'import-file.ts': 13,
  'memory.ts': 25,
  'modbus-poll.ts': 33,
  'mqtt-throughput.ts': 21,
  'opcua-browse-tree.ts': 34,
  'opcua-ingest.ts': 40,
  'opcua-recovery.ts': 148,
  'opcua-subscription.ts': 98,
  'outage-recovery.ts': 22,
  'plant-scale.ts': 160,
  'quality.ts': 6,
  'set-aside-requeue.ts': 9,
  'service-rate.ts': 35,
  'small-plant.ts': 25,
  'trend-flush.ts': 10,
  'uplink-budget.ts': 27,
};
const DEFAULT_COST_S = 40;

/** The benches of smoke file `shard` of `shards`: longest first onto the least loaded file. */
export function shardOf(shard: number, shards: number): string[] {
  const loads = Array.from({ length: shards }, () => ({ cost: 0, benches: [] as string[] }));
  const byCost = listBenches().sort((a, b) => (COST_S[b] ?? DEFAULT_COST_S) - (COST_S[a] ?? DEFAULT_COST_S) || a.localeCompare(b));
  for (const bench of byCost) {
    const target = loads.reduce((min, l) => (l.cost < min.cost ? l : min));
    target.cost += COST_S[bench] ?? DEFAULT_COST_S;
    target.benches.push(bench);
  }
  return loads[shard].benches.sort();
}

export interface SmokeRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  wallS: number;
  /** CPU seconds of the bench and every process it waited for (from this process's children times). */
  cpuS: number;
}

/** Variables of the benches' own sizes: a developer's exported BENCH_SECONDS must not resize the smoke run. */
const BENCH_SIZE_VARIABLE = /(^|_)BENCH_|^HIST1M_|^BASELINE_REF$|^SEAL_ROWS$/;

/** user + system CPU of the children this process has waited for, in seconds (/proc/self/stat cutime, cstime). */
function childrenCpuS(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(fields[13]) + Number(fields[14])) / 100;
}

/** Runs the bench at `path` (bench/<file>) with BENCH_SMOKE=1 through tsx; SIGKILLs its process group after `timeoutMs`. */
export async function runSmoke(path: string, timeoutMs: number): Promise<SmokeRun> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!BENCH_SIZE_VARIABLE.test(k)) env[k] = v;
  env.BENCH_SMOKE = '1';
  const cpu0 = childrenCpuS();
  const t0 = performance.now();
  // Its own process group, so a timeout also ends what the bench started (gateways, servers, brokers).
  const child = spawn(process.execPath, ['--import', 'tsx', path], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => {
    stderr += `\n[smoke test] no exit after ${timeoutMs / 1000} s: killed\n`;
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }, timeoutMs);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) => child.once('close', (c, s) => r([c, s])));
  clearTimeout(timer);
  // What the bench left behind in its group (a server it failed to stop) goes too.
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    /* nothing left */
  }
  return { code, signal, stdout, stderr, wallS: (performance.now() - t0) / 1000, cpuS: childrenCpuS() - cpu0 };
}

/** The source of bench/<file>. */
export const benchSource = (file: string): string => readFileSync(join(BENCH_DIR, file), 'utf8');

/** Why bench/<file> (its `source`) cannot be smoke-run, or null. */
export function missingSmokeMode(file: string, source: string): string | null {
  if (source.includes('smokeBanner(')) return null;
  return (
    `bench/${file} has no smoke mode: a benchmark must honour BENCH_SMOKE=1 (sizes from envNumber/envList of bench/lib.ts, ` +
    `then smokeBanner(...) before its work; bench/README.md "Smoke runs"). If it is not a benchmark but a module the benches ` +
    `import, add it to NON_BENCH_MODULES in test/helpers/bench-smoke.ts with what it is.`
  );
}

/** Why the bench did not run (its SKIPPED line) when it stopped for want of a peer (requirePeer), else null. */
export function peerMissing(run: Pick<SmokeRun, 'code' | 'stdout'>): string | null {
  if (run.code !== PEER_MISSING_EXIT) return null;
  return run.stdout.split('\n').find((l) => l.startsWith('SKIPPED:')) ?? 'SKIPPED: a peer is missing';
}

/** A multiplier printed as such: 11.5x lower, 0.19 × the time. */
const RATIO_FIGURE = /\d(?:\.\d+)?\s?[x×](?![a-z0-9])/i;

/** Bad figures: a measurement that did not happen, printed as if it had. */
const BAD_FIGURE = /\bNaN\b|\bnull\b|\bundefined\b|Infinity|∞/;

/** What is wrong with a finished smoke run of a bench whose source is `source` (empty: nothing). */
export function smokeProblems(source: string, run: Pick<SmokeRun, 'code' | 'signal' | 'stdout'>): string[] {
  const problems: string[] = [];
  const lines = run.stdout.split('\n');
  if (run.code !== 0) problems.push(`exited with ${run.code ?? run.signal}`);
  if (!run.stdout.includes(SMOKE_BANNER)) problems.push(`no "${SMOKE_BANNER}" line: the bench did not announce its smoke sizes`);
  const tableAt = lines.findIndex((l, i) => /^\|.*\|\s*$/.test(l) && /^\|[\s\-:|]+\|\s*$/.test(lines[i + 1] ?? ''));
  if (tableAt < 0) problems.push('no table (a Markdown table: header line, then |---|)');
  // lib.ts's NOISY_MACHINE_NOTE says "compare the ratio": that is not one.
  const ratioText = run.stdout.replace(/compare the ratio/gi, '');
  if (!/\bratio\b/i.test(ratioText) && !RATIO_FIGURE.test(ratioText)) problems.push('no ratio to the same-run baseline (a line or column naming "ratio", or a figure such as 2.3x)');
  if (source.includes('verdict(') && !lines.some((l) => /^(PASS|FAIL)\s/.test(l))) problems.push('no verdict line (PASS/FAIL), though the bench has verdicts');
  const bad = lines.filter((l) => BAD_FIGURE.test(l));
  if (bad.length > 0) problems.push(`figures that were not measured (NaN, null, undefined or infinite):\n    ${bad.slice(0, 10).join('\n    ')}`);
  return problems;
}

const tail = (text: string, n: number) => text.split('\n').slice(-n).join('\n');

/** The vitest suite of smoke file `shard` of `shards`. */
export function describeSmokeShard(shard: number, shards: number): void {
  const benches = shardOf(shard, shards);
  describe(`benchmarks smoke run (BENCH_SMOKE=1), part ${shard + 1} of ${shards}`, () => {
    // Generous: the smoke sizes take seconds on a quiet machine, minutes beside a full test run.
    const timeoutMs = 8 * 60_000;
    for (const file of benches) {
      it(`bench/${file} runs and prints its table, ratio and verdicts`, { timeout: timeoutMs + 30_000 }, async (ctx) => {
        const source = benchSource(file);
        const missing = missingSmokeMode(file, source);
        if (missing) expect.fail(missing);
        const run = await runSmoke(join(BENCH_DIR, file), timeoutMs);
        console.log(`smoke bench/${file}: ${run.wallS.toFixed(1)} s wall, ${run.cpuS.toFixed(1)} s CPU (exit ${run.code ?? run.signal})`);
        // BENCH_SMOKE_KEEP=<dir>: each bench's output kept there, to read what a smoke run printed.
        const keep = process.env.BENCH_SMOKE_KEEP;
        if (keep) {
          mkdirSync(keep, { recursive: true });
          writeFileSync(join(keep, file.replace(/\.ts$/, '.out')), `${run.stdout}\n--- stderr ---\n${run.stderr}`);
        }
        const why = peerMissing(run);
        if (why) {
          if (process.env.CI) expect.fail(`bench/${file}: ${why}, but CI is set: every benchmark must run in CI`);
          console.warn(`\n*** SKIPPING bench/${file}: ${why} ***\n`);
          ctx.skip();
        }
        const problems = smokeProblems(source, run);
        if (problems.length > 0) {
          expect.fail(`bench/${file} (BENCH_SMOKE=1):\n  - ${problems.join('\n  - ')}\n--- stdout (end) ---\n${tail(run.stdout, 40)}\n--- stderr (end) ---\n${tail(run.stderr, 30)}`);
        }
      });
    }
  });
}

/** Every module that NON_BENCH_MODULES names exists (a stale entry would hide a new bench of that name). */
export function staleNonBenchEntries(): string[] {
  return Object.keys(NON_BENCH_MODULES).filter((f) => !existsSync(join(BENCH_DIR, f)));
}
