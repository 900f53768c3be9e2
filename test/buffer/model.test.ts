/**
 * The buffer's invariants (src/buffer/README.md B1–B9) checked against a model, the way Vector's
 * disk_v2 buffer is checked: random sequences of append, seal, compact, claim (newest and oldest),
 * acknowledge, release, drop (an append that crosses buffer.max_bytes) and crash-and-reopen run
 * against the real buffer on a real SQLite file and against a plain in-memory model; every
 * invariant is checked after every step. fast-check shrinks a failure to the shortest sequence.
 *
 * The model knows which samples were appended, acknowledged and claimed; it learns each sample's
 * seq, and which are sealed, from the file. It does not predict which samples a drop deletes (that
 * depends on SQLite's pages), only what a drop may delete: unheld samples, the oldest unit (a row,
 * or a whole sealed chunk, by seq) first.
 */
import fc from 'fast-check';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SamplesRefusedError, type Sample } from '../../src/core/sample.js';
import type { BufferedRow } from '../../src/buffer/types.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';

const VARIABLES = ['line1/speed', 'line1/temp', 'line2/count'];
const T0 = Date.parse('2026-11-01T00:00:00Z');
/**
 * Small enough that about 500 unsent rows cross it and drop_oldest runs (an empty file's
 * samples owner holds 32 kB of schema and meta; a row takes ~16 bytes, a sealed sample ~1).
 */
const MAX_BYTES = 40 * 1024;

interface Model {
  /** Samples in the buffer (appended, neither acknowledged nor dropped), by key. */
  present: Map<string, { value: number }>;
  /** Open claims: the rows each returned. */
  claims: BufferedRow[][];
  /** Next timestamp per variable (appends only move forward, as sources do). */
  nextTs: number[];
  /** Samples of appends refused for a non-finite sample, since this process's metrics began (B1). */
  refusedInvalid: number;
}

interface Snapshot {
  bySeq: Map<number, string>;
  byKey: Map<string, { seq: number; unit: number; value: number }>;
  rows: number;
  sealed: number;
  chunks: number;
}

interface Real {
  tb: TestBuffer;
  dir: string;
  /** The file's state after the last step. */
  last: Snapshot;
  /** Samples this step appended, with their order after every unit the last step saw. */
  arrival: Map<string, number>;
}

const keyOf = (variable: string, ts: number) => `${variable}@${ts}`;
const EMPTY: Snapshot = { bySeq: new Map(), byKey: new Map(), rows: 0, sealed: 0, chunks: 0 };

/** The file's samples, each with its seq and unit (its own seq for a row, seq_from for a chunk's), checking B3 on the way. */
function snapshot(tb: TestBuffer): Snapshot {
  const chunks = tb.db.prepare('SELECT seq_from, n FROM chunks ORDER BY seq_from').all() as Array<{ seq_from: number; n: number }>;
  const rowSeqs = new Set(tb.db.prepare('SELECT seq FROM samples').pluck(true).all() as number[]);
  // B3: chunks never overlap, and no seq is both a row and inside a chunk.
  for (let i = 1; i < chunks.length; i++) {
    expect(chunks[i].seq_from, `chunk at ${chunks[i].seq_from} overlaps the one at ${chunks[i - 1].seq_from}`).toBeGreaterThan(chunks[i - 1].seq_from + chunks[i - 1].n - 1);
  }
  const chunkOf = (seq: number): number | null => {
    let lo = 0;
    let hi = chunks.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const c = chunks[mid];
      if (seq < c.seq_from) hi = mid - 1;
      else if (seq > c.seq_from + c.n - 1) lo = mid + 1;
      else return c.seq_from;
    }
    return null;
  };
  const bySeq = new Map<number, string>();
  const byKey = new Map<string, { seq: number; unit: number; value: number }>();
  for (const batch of tb.buffer.readRange({ from: 0, to: Number.MAX_SAFE_INTEGER })) {
    for (const r of batch) {
      const key = keyOf(r.variable, r.ts);
      expect(bySeq.has(r.seq), `seq ${r.seq} is held twice`).toBe(false);
      expect(byKey.has(key), `sample ${key} is in the file twice`).toBe(false);
      const chunk = chunkOf(r.seq);
      if (chunk !== null) expect(rowSeqs.has(r.seq), `seq ${r.seq} is a row and inside the chunk at ${chunk}`).toBe(false);
      bySeq.set(r.seq, key);
      byKey.set(key, { seq: r.seq, unit: chunk ?? r.seq, value: r.value });
    }
  }
  return { bySeq, byKey, rows: rowSeqs.size, sealed: chunks.reduce((a, c) => a + c.n, 0), chunks: chunks.length };
}

function claimedKeys(m: Model): Set<string> {
  const out = new Set<string>();
  for (const c of m.claims) for (const r of c) out.add(keyOf(r.variable, r.ts));
  return out;
}

/** Every invariant that can be read from the file and the buffer's counts, after any step. */
function checkAll(m: Model, r: Real): Snapshot {
  const s = snapshot(r.tb);
  // B2: a sample leaves only for a reason (acknowledged or dropped: the step took it out of the model).
  for (const [key, want] of m.present) {
    const got = s.byKey.get(key);
    expect(got, `sample ${key} left the buffer without a reason`).toBeDefined();
    expect(got!.value, `sample ${key} changed its value`).toBe(want.value);
  }
  expect(s.byKey.size, 'the file holds samples nobody appended, or acknowledged ones').toBe(m.present.size);
  // B3: a held seq names the same sample for as long as the hold lasts.
  for (const claim of m.claims) for (const row of claim) expect(s.bySeq.get(row.seq), `claimed seq ${row.seq}`).toBe(keyOf(row.variable, row.ts));
  // B8: the counts follow the file.
  const st = r.tb.buffer.stats();
  expect({ liveRows: st.liveRows, sealedSamples: st.sealedSamples, chunks: st.chunks, rows: st.rows }).toEqual({ liveRows: s.rows, sealedSamples: s.sealed, chunks: s.chunks, rows: s.rows + s.sealed });
  return s;
}

async function refusedInvalid(tb: TestBuffer): Promise<number> {
  const got = await tb.metrics.bufferRefusedSamples.get();
  return got.values.filter((v) => v.labels.reason === 'invalid_sample').reduce((a, v) => a + v.value, 0);
}

function samplesFor(m: Model, n: number, spread: number): Sample[] {
  const out: Sample[] = [];
  for (let i = 0; i < n; i++) {
    const v = i % Math.min(spread, VARIABLES.length);
    const ts = m.nextTs[v];
    m.nextTs[v] += 1_000;
    out.push({ variable: VARIABLES[v], ts, value: (ts - T0) / 1_000 + v / 10 });
  }
  return out;
}


/**
 * B2d: any commit over buffer.max_bytes (an append's, an acknowledgement's) may be followed by
 * drop_oldest, which deletes unheld samples only, the oldest unit (row or whole chunk) first. The
 * samples the step's drops deleted leave the model here; anything else missing is caught by checkAll.
 */
function accountForDrops(m: Model, r: Real): void {
  const now = snapshot(r.tb);
  const dropped = [...m.present.keys()].filter((k) => !now.byKey.has(k));
  if (dropped.length === 0) return;
  const held = claimedKeys(m);
  const unitBefore = (k: string) => r.last.byKey.get(k)?.unit ?? r.arrival.get(k) ?? Number.NaN;
  let newestDropped = -Infinity;
  for (const k of dropped) {
    expect(held.has(k), `drop_oldest deleted the claimed sample ${k}`).toBe(false);
    newestDropped = Math.max(newestDropped, unitBefore(k));
    m.present.delete(k);
  }
  for (const k of m.present.keys()) {
    if (held.has(k)) continue;
    expect(unitBefore(k), `drop_oldest kept ${k} and deleted newer samples (up to the unit at seq ${newestDropped})`).toBeGreaterThan(newestDropped);
  }
}
const settle = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

/** A step: acts, lets its own consequences (drop_oldest after a commit) have their turn, then checks every invariant. */
abstract class Step implements fc.AsyncCommand<Model, Real> {
  check(_m: Readonly<Model>): boolean {
    return true;
  }
  protected abstract act(m: Model, r: Real): Promise<void>;
  async run(m: Model, r: Real): Promise<void> {
    r.arrival = new Map();
    await this.act(m, r);
    await settle();
    accountForDrops(m, r);
    r.last = checkAll(m, r);
  }
  abstract toString(): string;
}

class Append extends Step {
  constructor(
    readonly n: number,
    readonly spread: number,
  ) {
    super();
  }
  protected async act(m: Model, r: Real): Promise<void> {
    const samples = samplesFor(m, this.n, this.spread);
    const inFile = () => r.tb.buffer.stats().rows;
    const inFileBefore = inFile();
    let atAck: { rows: number; wal: number } | null = null;
    await r.tb.buffer.append(samples).then(() => {
      atAck = { rows: inFile(), wal: r.tb.buffer.walBytes() };
    });
    // B7: nothing runs between a commit and its acknowledgement: no drop, no WAL truncation.
    expect(atAck!.rows, 'samples were deleted (drop_oldest) before the append was acknowledged').toBe(inFileBefore + samples.length);
    expect(atAck!.wal, 'the WAL was truncated before the append was acknowledged').toBeGreaterThan(0);
    for (const s of samples) m.present.set(keyOf(s.variable, s.ts), { value: s.value });
    // This append's samples are newer than every unit before it, in their order.
    r.arrival = new Map(samples.map((s, i) => [keyOf(s.variable, s.ts), Number.MAX_SAFE_INTEGER - samples.length + i]));
  }
  toString(): string {
    return `append(${this.n} over ${this.spread})`;
  }
}

class AppendNonFinite extends Step {
  constructor(
    readonly n: number,
    readonly at: number,
    readonly what: 'NaN' | 'Infinity' | 'ts',
  ) {
    super();
  }
  protected async act(m: Model, r: Real): Promise<void> {
    const saved = [...m.nextTs];
    const samples = samplesFor(m, this.n, VARIABLES.length);
    m.nextTs = saved; // none of them is kept: a later append may use the same timestamps
    const bad = samples[this.at % samples.length];
    if (this.what === 'NaN') bad.value = Number.NaN;
    else if (this.what === 'Infinity') bad.value = Number.POSITIVE_INFINITY;
    else bad.ts = Number.NaN;
    const err = await r.tb.buffer.append(samples).then(
      () => null,
      (e: unknown) => e,
    );
    // B1: refused as every refusal is: the promise rejects, nothing of it is committed, it is counted.
    expect(err, 'an append holding a non-finite sample resolved').toBeInstanceOf(SamplesRefusedError);
    expect((err as SamplesRefusedError).code).toBe('INVALID_SAMPLE');
    expect((err as SamplesRefusedError).reason).toContain(bad.variable);
    m.refusedInvalid += samples.length;
    expect(await refusedInvalid(r.tb)).toBe(m.refusedInvalid);
  }
  toString(): string {
    return `appendNonFinite(${this.n}, ${this.what} at ${this.at})`;
  }
}

class Seal extends Step {
  protected async act(_m: Model, r: Real): Promise<void> {
    r.tb.buffer.sealNow();
  }
  toString(): string {
    return 'seal';
  }
}

class Compact extends Step {
  protected async act(_m: Model, r: Real): Promise<void> {
    r.tb.buffer.compactNow();
  }
  toString(): string {
    return 'compact';
  }
}

class Claim extends Step {
  constructor(
    readonly limit: number,
    readonly oldest: boolean,
  ) {
    super();
  }
  protected async act(m: Model, r: Real): Promise<void> {
    const held = claimedKeys(m);
    const rows = this.oldest ? r.tb.buffer.claimOldest(this.limit) : r.tb.buffer.claimNewest(this.limit);
    const s = snapshot(r.tb);
    const mine = new Set<string>();
    for (const row of rows) {
      const k = keyOf(row.variable, row.ts);
      // B4: one sender per sample.
      expect(held.has(k), `the claim returned ${k}, which another claim holds`).toBe(false);
      expect(mine.has(k), `the claim returned ${k} twice`).toBe(false);
      expect(m.present.has(k), `the claim returned ${k}, which is not in the buffer`).toBe(true);
      mine.add(k);
    }
    expect(rows.length).toBeLessThanOrEqual(this.limit);
    // B5: newest first for claimNewest, oldest first for claimOldest, across rows and chunks.
    const unheld = [...m.present.keys()].filter((k) => !held.has(k) && !mine.has(k)).map((k) => s.byKey.get(k)!.seq);
    if (rows.length < this.limit) expect(unheld.length, `a claim of ${this.limit} returned ${rows.length} while ${unheld.length} samples were unheld`).toBe(0);
    if (rows.length > 0 && unheld.length > 0) {
      const seqs = rows.map((x) => x.seq);
      if (this.oldest) expect(Math.min(...unheld), 'claimOldest left an older sample unheld').toBeGreaterThan(Math.max(...seqs));
      else expect(Math.max(...unheld), 'claimNewest left a newer sample unheld').toBeLessThan(Math.min(...seqs));
    }
    if (rows.length > 0) m.claims.push(rows);
  }
  toString(): string {
    return `${this.oldest ? 'claimOldest' : 'claimNewest'}(${this.limit})`;
  }
}

class Answer extends Step {
  constructor(
    readonly which: number,
    readonly ack: boolean,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.claims.length > 0;
  }
  protected async act(m: Model, r: Real): Promise<void> {
    const [rows] = m.claims.splice(this.which % m.claims.length, 1);
    if (this.ack) {
      r.tb.buffer.ack(rows);
      await r.tb.buffer.flush();
      for (const row of rows) m.present.delete(keyOf(row.variable, row.ts));
    } else r.tb.buffer.release(rows);
  }
  toString(): string {
    return `${this.ack ? 'ack' : 'release'}(claim ${this.which})`;
  }
}

/** A power cut after the last commit: the file as committed; no claim survives (B4: claims are advisory). */
class CrashAndReopen extends Step {
  protected async act(m: Model, r: Real): Promise<void> {
    const image = r.tb.db.serialize();
    await r.tb.close();
    const path = join(r.dir, `reopened-${Math.random().toString(36).slice(2)}.db`);
    writeFileSync(path, image);
    r.tb = openBuffer(r.dir, path);
    m.claims = [];
    // The refusal counter lives in the process (a new registry here), not in the file.
    m.refusedInvalid = 0;
  }
  toString(): string {
    return 'crashAndReopen';
  }
}

function openBuffer(dir: string, path: string): TestBuffer {
  return openTestBuffer({
    dir,
    path,
    maxBytes: MAX_BYTES,
    whenFull: 'drop_oldest',
    // Sealing and compaction run when the model says so (sealNow, compactNow), not by the clock.
    sealAfterMs: 3_600_000,
    sealRows: 400,
    // Group commits at once: the model awaits each append.
    commitIntervalMs: 1,
    compactSamples: 2_000,
    // A TRUNCATE checkpoint is due after every commit (at most once a second): B7's order shows.
    walLimitBytes: 1,
  });
}

const append = fc.tuple(fc.integer({ min: 1, max: 400 }), fc.integer({ min: 1, max: 3 })).map(([n, spread]) => new Append(n, spread));
/** Appends twice as often as any other step: drops need a backlog. */
const commands = [
  append,
  append,
  fc.tuple(fc.integer({ min: 1, max: 20 }), fc.nat(), fc.constantFrom('NaN' as const, 'Infinity' as const, 'ts' as const)).map(([n, at, what]) => new AppendNonFinite(n, at, what)),
  fc.constant(new Seal()),
  fc.constant(new Compact()),
  fc.tuple(fc.integer({ min: 1, max: 300 }), fc.boolean()).map(([limit, oldest]) => new Claim(limit, oldest)),
  fc.tuple(fc.nat(), fc.boolean()).map(([which, ack]) => new Answer(which, ack)),
  fc.constant(new CrashAndReopen()),
];

describe('the buffer against a model (B1–B9)', () => {
  it('keeps every invariant after every step of random append, seal, compact, claim, ack, release, drop and crash-and-reopen sequences', async () => {
    const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 40 }), async (cmds) => {
        const dir = mkdtempSync(join(base, 'gw-model-'));
        const real: Real = { tb: openBuffer(dir, join(dir, 'buffer.db')), dir, last: EMPTY, arrival: new Map() };
        const model: Model = { present: new Map(), claims: [], nextTs: VARIABLES.map(() => T0), refusedInvalid: 0 };
        try {
          await fc.asyncModelRun(() => ({ model, real }), cmds);
        } finally {
          await real.tb.destroy();
          rmSync(dir, { recursive: true, force: true });
        }
      }),
      { numRuns: Number(process.env.MODEL_RUNS ?? 50), endOnFailure: true },
    );
  }, Number(process.env.MODEL_TIMEOUT_MS ?? 240_000));
});
