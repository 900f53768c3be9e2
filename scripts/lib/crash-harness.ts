/**
 * Crash-safety harness (issue: "prove crash safety"). Runs the real gateway as a child process
 * against the emulator with injected faults, kills it with SIGKILL at random moments and at chosen
 * phases (ingest, sync send, import file build, upload, job polling), restarts it, and at the end
 * compares what was committed to the buffer with what the emulator stored.
 *
 * How "committed" is known without trusting the gateway: the generator source writes, at every
 * tick, one sample per variable with value = tick number (counting from 0 in each process run) and
 * one timestamp per tick. A tick is one `append`, so one transaction, and transactions commit in
 * order; hence if tick K of a run is committed, ticks 0..K are. K is read after each kill from the
 * buffer file (the child is dead) and from the emulator. At the end every variable must have every
 * tick 0..K of every run stored upstream: anything missing is a lost sample.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import BetterSqlite3 from 'better-sqlite3';
import { stringify } from 'yaml';
import { readAllSamples } from '../../src/buffer/chunks/store.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';

export type KillPhase =
  | 'random'
  | 'import_build_started'
  | 'import_upload_started'
  | 'import_job_submitted'
  | 'import_job_polled'
  | 'buffer_seal_started'
  | 'buffer_sealed'
  | 'buffer_compact_started'
  | 'chunk_unsealed'
  | 'buffer_chunks_dropping'
  // Inside the maintenance schedule (src/buffer/maintenance.ts): right before a staged job's
  // commit transaction, which a kill a few ms later lands in.
  | 'buffer_seal_committing'
  | 'buffer_compact_committing'
  // Inside a vacuum step (src/buffer/capacity/disk.ts): returning free pages to the file system.
  | 'buffer_vacuum_step';

export interface CrashHarnessOptions {
  cycles: number;
  /** Work directory (buffer, config, logs). */
  dir: string;
  /** Machine variables the generator writes each tick (from the demo fixture's mvr_gen_1..20). */
  variables?: number;
  /** Generator tick. */
  tickMs?: number;
  /** A random kill lands this long after start-up, uniformly in [min, max]. */
  minRunMs?: number;
  maxRunMs?: number;
  /** Random seed for kill times and phases. */
  seed?: number;
  /** Run the child from dist/ (built) instead of the TypeScript sources. */
  useDist?: boolean;
  /**
   * Drop mode: buffer.max_bytes at its minimum (1 MB) and a service that mostly fails, so the
   * buffer fills and drop_oldest deletes sealed chunks; adds the kill phase buffer_chunks_dropping.
   * Missing samples then must be covered, per variable, by the drops the gateway announced in its
   * log before committing them (an unannounced missing sample counts as lost).
   */
  dropChunks?: boolean;
  log?: (line: string) => void;
}

export interface CrashReport {
  cycles: number;
  runs: number;
  samplesCommitted: number;
  samplesStored: number;
  lost: number;
  lostExamples: string[];
  resentDuplicates: number;
  unexpected: number;
  integrity: { ok: number; failed: string[] };
  killsByPhase: Record<string, number>;
  importJobs: number;
  /** Drop mode: samples the gateway announced it drops (before commit), and missing samples they cover. */
  droppedAnnounced: number;
  missingCoveredByDrops: number;
  durationMs: number;
}

const ROOT = join(import.meta.dirname, '..', '..');

function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4_294_967_296;
  };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

interface Run {
  startedAt: number;
  endedAt: number;
  maxTick: number;
}

export async function runCrashHarness(o: CrashHarnessOptions): Promise<CrashReport> {
  const started = Date.now();
  const log = o.log ?? (() => undefined);
  const random = rng(o.seed ?? 12345);
  const nVars = o.variables ?? 20;
  const variables = Array.from({ length: nVars }, (_, i) => `mvr_gen_${i + 1}`);
  mkdirSync(o.dir, { recursive: true });
  const emu = await startEmulator({ port: 0, jobProcessingDelayMs: 300 });
  const dbPath = join(o.dir, 'buffer.db');
  const httpPort = await freePort();
  const config = {
    gateway: { name: 'crash', data_dir: join(o.dir, 'data'), status_interval: 0 },
    log: { level: 'debug', format: 'json' },
    service: { base_url: emu.baseUrl, auth_url: emu.authUrl, organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' }, request_timeout: '2s' },
    // A small budget so the backlog outgrows the sync path and import jobs run in most cycles.
    uplink: { requests_per_minute: 60, flush_interval: 100, max_in_flight: 2, backfill: { threshold: '10s', max_file_bytes: 300_000, max_jobs_in_flight: 2, poll_interval: 100, poll_interval_max: 300 } },
    // Buffer v2: seal after a second in small steps, so every cycle seals, claims sealed samples and
    // builds import files from chunks.
    // Small compaction windows, so that compaction (and kills inside it) happen in most cycles too.
    // Free pages go back to the disk after a second (keep_free 0), so that vacuum steps (and kills
    // inside them) happen in most cycles too.
    buffer: { path: dbPath, commit_interval: 50, seal_after: '1s', seal_rows: 1_000, compact_samples: 3_000, keep_free: 0, return_free_after: '1s', ...(o.dropChunks ? { max_bytes: '1MB' } : {}) },
    http: { enabled: true, host: '127.0.0.1', port: httpPort },
    generator: [{ name: 'ticks', variables, interval: o.tickMs ?? 20, shape: 'counter' }],
  };
  const cfgPath = join(o.dir, 'gateway.yaml');
  writeFileSync(cfgPath, stringify(config));

  const runs: Run[] = [];
  const children = new Set<ChildProcess>();
  const killAll = () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  process.once('exit', killAll);
  const killsByPhase: Record<string, number> = {};
  const integrity = { ok: 0, failed: [] as string[] };
  const phases: KillPhase[] = ['random', 'random', 'import_build_started', 'import_upload_started', 'import_job_submitted', 'import_job_polled', 'buffer_seal_started', 'buffer_sealed', 'buffer_compact_started', 'chunk_unsealed', 'buffer_seal_committing', 'buffer_compact_committing', 'buffer_vacuum_step'];
  if (o.dropChunks) phases.push('buffer_chunks_dropping', 'buffer_chunks_dropping', 'buffer_chunks_dropping');
  /** Per variable: samples the gateway announced it drops (buffer_chunks_dropping / buffer_rows_dropping). */
  const announced = new Map<string, number>();

  const spawnGateway = (): { child: ChildProcess; events: NodeJS.EventEmitter; ready: Promise<void> } => {
    const args = o.useDist ? [join(ROOT, 'dist', 'cli.js'), 'run', '--config', cfgPath] : ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'run', '--config', cfgPath];
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    // Every run's log is kept in the work directory, for diagnosing a reported loss.
    const logFile = createWriteStream(join(o.dir, `gateway-run-${runs.length + 1}.log`));
    child.stdout!.pipe(logFile);
    children.add(child);
    child.once('exit', () => children.delete(child));
    const lines = createInterface({ input: child.stdout! });
    let resolveReady!: () => void;
    const ready = new Promise<void>((r) => (resolveReady = r));
    lines.on('line', (line) => {
      let entry: { msg?: string; event?: string; chunks?: Array<[string, number, number, number]>; per_variable?: Record<string, number> };
      try {
        entry = JSON.parse(line);
      } catch {
        return;
      }
      if (entry.msg === 'gateway started') resolveReady();
      if (entry.event === 'buffer_chunks_dropping') for (const [v, n] of entry.chunks ?? []) announced.set(v, (announced.get(v) ?? 0) + n);
      if (entry.event === 'buffer_rows_dropping') for (const [v, n] of Object.entries(entry.per_variable ?? {})) announced.set(v, (announced.get(v) ?? 0) + n);
      if (entry.event) child.emit(`phase:${entry.event}`);
    });
    child.stderr!.on('data', (d) => log(`child stderr: ${String(d).trim()}`));
    return { child, events: child, ready };
  };

  const exited = (child: ChildProcess) => new Promise<void>((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', () => r())));

  /** Highest tick of this run found in the buffer file (the child is dead, so the file is still). */
  const maxTickInBuffer = (run: Run): number => {
    const db = new BetterSqlite3(dbPath, { readonly: true });
    try {
      const check = db.pragma('integrity_check', { simple: true });
      if (check === 'ok') integrity.ok++;
      else integrity.failed.push(String(check));
      let max = -1;
      for (const s of readAllSamples(db)) if (s.ts >= run.startedAt && s.ts <= run.endedAt && s.value > max) max = s.value;
      return max;
    } finally {
      db.close();
    }
  };

  const setFiller = (on: boolean): void => {
    const db = new BetterSqlite3(dbPath);
    try {
      if (on) {
        db.exec('CREATE TABLE IF NOT EXISTS harness_filler (b BLOB)');
        if (db.prepare('SELECT count(*) FROM harness_filler').pluck(true).get() === 0) db.prepare('INSERT INTO harness_filler (b) VALUES (zeroblob(850000))').run();
      } else {
        db.exec('DROP TABLE IF EXISTS harness_filler');
      }
    } finally {
      db.close();
    }
  };

  const maxTickUpstream = (run: Run): number => {
    let max = -1;
    for (const v of variables) {
      for (const x of emu.values(v)) {
        const ts = Date.parse(x.timestamp);
        if (ts >= run.startedAt && ts <= run.endedAt && x.value > max) max = x.value;
      }
    }
    return max;
  };

  try {
    emu.setFaults(
      o.dropChunks
        ? { error_rate: 0.9, status: 500, latency_ms: 10, drop_connection_rate: 0.02, job_failure_rate: 0.9 }
        : { error_rate: 0.05, status: 500, latency_ms: 10, drop_connection_rate: 0.02, job_failure_rate: 0.1 },
    );
    for (let cycle = 0; cycle < o.cycles; cycle++) {
      // Drop mode: a filler table in the buffer file (the child is dead) keeps it near max_bytes,
      // so drop_oldest runs within seconds of every start instead of after minutes of ingest. It
      // leaves ~30 KB of room (the file's own pages are ~110 KB): enough that the newest ticks
      // survive, since the highest surviving tick is how a run's committed ticks are known.
      if (o.dropChunks && cycle > 0) setFiller(true);
      const target = phases[Math.floor(random() * phases.length)];
      const run: Run = { startedAt: Date.now(), endedAt: 0, maxTick: -1 };
      const { child, events, ready } = spawnGateway();
      const gone = exited(child);
      await Promise.race([ready, gone]);
      const minRun = o.minRunMs ?? 300;
      const maxRun = o.maxRunMs ?? 2_500;
      let phase = 'random';
      await new Promise<void>((resolve) => {
        const randomKill = setTimeout(resolve, minRun + random() * (maxRun - minRun) + (target === 'random' ? 0 : 3_000));
        if (target !== 'random') {
          events.once(`phase:${target}`, () => {
            phase = target;
            clearTimeout(randomKill);
            // Land inside the phase: a few milliseconds after it began.
            setTimeout(resolve, Math.floor(random() * 15));
          });
        }
        void gone.then(resolve);
      });
      child.kill('SIGKILL');
      await gone;
      run.endedAt = Date.now();
      killsByPhase[phase] = (killsByPhase[phase] ?? 0) + 1;
      run.maxTick = Math.max(maxTickInBuffer(run), maxTickUpstream(run));
      runs.push(run);
      log(`cycle ${cycle + 1}/${o.cycles}: killed (${phase}) after ${run.endedAt - run.startedAt} ms, highest committed tick ${run.maxTick}`);
    }

    // Final run without faults or kills and with a normal budget, until everything is delivered;
    // then a graceful stop.
    emu.clearFaults();
    if (o.dropChunks) setFiller(false);
    writeFileSync(cfgPath, stringify({ ...config, uplink: { ...config.uplink, requests_per_minute: 3_000 } }));
    const final: Run = { startedAt: Date.now(), endedAt: 0, maxTick: -1 };
    const { child, ready } = spawnGateway();
    const gone = exited(child);
    let finalExited = false;
    void gone.then(() => (finalExited = true));
    await Promise.race([ready, gone]);
    const deadline = Date.now() + 300_000;
    await new Promise((r) => setTimeout(r, 1_500));
    let lastLog = 0;
    for (;;) {
      const res = await fetch(`http://127.0.0.1:${httpPort}/status`).then((r) => r.json() as Promise<{ buffer: { samples: number }; uplink: unknown; backfill: unknown }>, () => null);
      if (res && Date.now() - lastLog > 10_000) {
        lastLog = Date.now();
        log(`final run: ${JSON.stringify({ buffer: res.buffer, uplink: res.uplink, backfill: res.backfill })}`);
      }
      if (res && res.buffer.samples <= nVars * 20) break; // only the live tail remains
      if (finalExited) throw new Error(`the final gateway run exited with code ${child.exitCode} (signal ${child.signalCode})`);
      if (!res && Date.now() - lastLog > 10_000) {
        lastLog = Date.now();
        log('final run: /status does not answer yet');
      }
      if (Date.now() > deadline) throw new Error('the final run did not drain the backlog within 5 minutes');
      await new Promise((r) => setTimeout(r, 500));
    }
    child.kill('SIGTERM');
    await gone;
    final.endedAt = Date.now();
    final.maxTick = Math.max(maxTickInBuffer(final), maxTickUpstream(final));
    runs.push(final);

    // Compare.
    let committed = 0;
    let lost = 0;
    const lostExamples: string[] = [];
    for (const run of runs) committed += (run.maxTick + 1) * nVars;
    let stored = 0;
    let duplicates = 0;
    let unexpected = 0;
    let missingCovered = 0;
    const remaining = new BetterSqlite3(dbPath, { readonly: true });
    const stillBuffered = readAllSamples(remaining);
    remaining.close();
    // A run's samples are those stamped from its start until the next run's start: the previous
    // child is dead (SIGKILL awaited) before the next is spawned, and the generator never stamps
    // a sample later than its own wall clock, so the windows cannot overlap.
    const runOf = (ts: number): number => {
      for (let r = runs.length - 1; r >= 0; r--) if (ts >= runs[r].startedAt) return ts <= runs[r].endedAt ? r : -1;
      return -1;
    };
    for (const v of variables) {
      const seen = runs.map(() => new Set<number>());
      for (const x of emu.values(v)) {
        const ts = Date.parse(x.timestamp);
        const r = runOf(ts);
        if (r < 0) {
          unexpected++;
          continue;
        }
        seen[r].add(x.value);
        stored++;
        if (x.writes > 1) duplicates += x.writes - 1;
      }
      // The last run was stopped gracefully: what it still holds is committed and will go out next start.
      for (const x of stillBuffered.filter((b) => b.variable === v)) {
        const r = runOf(x.ts);
        if (r >= 0) seen[r].add(x.value);
      }
      let missing = 0;
      const examples: string[] = [];
      runs.forEach((run, r) => {
        for (let tick = 0; tick <= run.maxTick; tick++) {
          if (!seen[r].has(tick)) {
            missing++;
            if (examples.length < 10) examples.push(`${v} run ${r + 1} tick ${tick}`);
          }
        }
      });
      // Only samples the gateway announced as dropped may be missing (drop mode); the rest is lost.
      const covered = Math.min(missing, announced.get(v) ?? 0);
      missingCovered += covered;
      if (missing > covered) {
        lost += missing - covered;
        lostExamples.push(...examples.slice(0, Math.max(0, 10 - lostExamples.length)));
      }
    }
    return {
      cycles: o.cycles,
      runs: runs.length,
      samplesCommitted: committed,
      samplesStored: stored,
      lost,
      lostExamples,
      resentDuplicates: duplicates,
      unexpected,
      integrity,
      killsByPhase,
      importJobs: emu.importJobs().length,
      droppedAnnounced: [...announced.values()].reduce((a, b) => a + b, 0),
      missingCoveredByDrops: missingCovered,
      durationMs: Date.now() - started,
    };
  } finally {
    // Whatever happened, no gateway outlives the harness.
    killAll();
    process.off('exit', killAll);
    await emu.close();
  }
}

export function formatReport(r: CrashReport): string {
  return [
    'crash-safety harness',
    `  cycles (SIGKILL)        ${r.cycles}`,
    `  kills by phase          ${Object.entries(r.killsByPhase).map(([k, v]) => `${k} ${v}`).join(', ')}`,
    `  samples committed       ${r.samplesCommitted.toLocaleString('en-US')}`,
    `  samples stored upstream ${r.samplesStored.toLocaleString('en-US')}`,
    `  lost                    ${r.lost}${r.lostExamples.length ? ` (e.g. ${r.lostExamples.join('; ')})` : ''}`,
    `  re-sent duplicates      ${r.resentDuplicates.toLocaleString('en-US')} (harmless: same value, same timestamp)`,
    `  unexpected values       ${r.unexpected}`,
    `  integrity checks        ${r.integrity.ok} ok, ${r.integrity.failed.length} failed${r.integrity.failed.length ? `: ${r.integrity.failed.join('; ')}` : ''}`,
    `  import jobs created     ${r.importJobs}`,
    `  drops announced         ${r.droppedAnnounced.toLocaleString('en-US')} samples (missing and covered by them: ${r.missingCoveredByDrops.toLocaleString('en-US')})`,
    `  duration                ${(r.durationMs / 1000).toFixed(1)} s`,
  ].join('\n');
}
