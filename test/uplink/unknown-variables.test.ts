import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.js';
import { DEMO_FIXTURE, startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { itemIndexInMessage, itemMessage } from '../../src/uplink/unknown-variables.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { holdsFor, waitFor } from '../helpers/wait.js';

/**
 * Issue 24 §1: batches refused (400) because some machine variables are unknown to the service.
 * The emulator's fixture knows mvr_gen_1..20; a generator maps mvr_gen_1..500, so 480 are unknown.
 * Before: the uplink flapped halted/resumed, thousands of batches were refused, nothing was
 * delivered or set aside, and /status said "ok".
 */
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { logger: createLogger({ level: 'info', format: 'json', destination: stream }), lines };
}

const KNOWN = new Set(DEMO_FIXTURE.machine_variables.map((v) => v.id));

describe('a batch refused for unknown machine variables (issue 24 §1)', () => {
  it('reads the item a 400 locates by its path, whatever the words', () => {
    expect(itemIndexInMessage('items[17].machine_variable_id: unknown machine variable "mvr_x"')).toBe(17);
    expect(itemIndexInMessage('items[0].value: "a" is not a number')).toBe(0);
    expect(itemIndexInMessage('The request payload is invalid.')).toBeNull();
    expect(itemIndexInMessage('myitems[3] is odd')).toBeNull();
    expect(itemMessage('items[17].machine_variable_id: unknown machine variable "mvr_x"')).toBe('machine_variable_id: unknown machine variable "mvr_x"');
  });

  it('500 mapped variables, 480 unknown: known ones delivered, unknown named and set aside, one problem, no flapping', async () => {
    const emu: EmulatorHandle = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const { logger, lines } = capture();
    const gw: TestGateway = await startTestGateway(emu, { generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: 500 }, interval: 1000 }] }, { logger });
    cleanup.push(() => gw.destroy());

    // Uplink condition transitions, sampled every 5 ms besides the log lines below.
    let transitions = 0;
    let last = gw.handle.health.condition;
    const watch = setInterval(() => {
      const c = gw.handle.health.condition;
      if (c !== last) transitions++;
      last = c;
    }, 5);
    cleanup.push(async () => clearInterval(watch));

    const started = performance.now();
    const st = await waitFor(
      () => {
        const s = gw.handle.status();
        return s.uplink.unknown_variables?.count === 480 ? s : null;
      },
      { timeoutMs: 30_000, intervalMs: 50, what: '480 unknown variables identified' },
    );
    const identifiedInS = (performance.now() - started) / 1000;
    expect(identifiedInS).toBeLessThan(20);
    // Which variable, which source, what the service said.
    const ex = st.uplink.unknown_variables.examples[0];
    expect(KNOWN.has(ex.variable)).toBe(false);
    expect(ex.source).toBe('gen');
    expect(st.uplink.unknown_variables.by_source).toEqual({ gen: 480 });
    expect(st.uplink.unknown_variables.examples.some((e) => /unknown machine variable "mvr_gen_\d+"/.test(e.message))).toBe(true);

    // The known variables are delivered, and keep being delivered.
    await waitFor(() => [...KNOWN].filter((v) => v.startsWith('mvr_gen_')).every((v) => (emu.valueCounts()[v] ?? 0) >= 3), { timeoutMs: 30_000, what: 'known variables delivered 3 times each' });
    const counts = emu.valueCounts();
    for (const v of Object.keys(counts)) expect(KNOWN.has(v), `${v} stored upstream`).toBe(true);

    // The unknown ones are set aside, each with the service's message; nothing piles up in the buffer.
    await waitFor(() => gw.handle.status().set_aside.samples >= 480 * 3, { timeoutMs: 30_000, what: 'three rounds of unknown samples set aside' });
    const rows = gw.handle.buffer.setAsideStore.list({ limit: 2000 });
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(KNOWN.has(r.variable!)).toBe(false);
      expect(r.reason).toMatch(/unknown machine variable/);
    }
    await holdsFor(() => gw.handle.buffer.stats().rows < 2_000, { forMs: 3_000, intervalMs: 100, what: 'the buffer does not grow with unknown samples' });

    // Ends quickly: a handful of refused batches, not thousands; the uplink stays ok.
    const batch = emu.stats().requests['POST /machine-data/batch'] ?? {};
    expect(batch['400'] ?? 0).toBeLessThan(60);
    expect(gw.handle.status().uplink.condition).toBe('ok');
    expect(transitions).toBe(0);
    expect(lines.filter((l) => /delivery resumes|delivery stops/.test(String(l.msg)))).toEqual([]);
    // One log line for the unknown variables (throttled to one a minute), not one per batch.
    const unknownLines = lines.filter((l) => /unknown to the organisation's catalog/.test(String(l.msg)));
    expect(unknownLines.length).toBe(1);
    expect(String(unknownLines[0].msg)).not.toContain('secret');
  }, 90_000);

  it('keeps at most uplink.unknown_variables.keep_set_aside of their samples: the oldest go, counted and logged once (issue 24 §4)', async () => {
    const emu: EmulatorHandle = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const { logger, lines } = capture();
    const keep = 1_500;
    const gw = await startTestGateway(emu, { generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: 500 }, interval: 200 }], uplink: { unknown_variables: { keep_set_aside: keep } } }, { logger });
    cleanup.push(() => gw.destroy());
    await waitFor(async () => /gateway_set_aside_dropped_samples_total\{reason="unknown_variable"\} [1-9]/.test(await gw.handle.metrics.registry.metrics()), { timeoutMs: 60_000, what: 'the oldest unknown samples dropped' });
    // Another few rounds: the list stays at the bound while 2,400 unknown samples a second arrive.
    const firstKept = gw.handle.buffer.setAsideStore.list({ limit: 1 })[0];
    await waitFor(() => (gw.handle.buffer.setAsideStore.list({ limit: 1 })[0]?.id ?? 0) > firstKept.id + keep, { timeoutMs: 30_000, what: 'the oldest kept replaced by newer ones' });
    await holdsFor(() => gw.handle.status().set_aside.samples <= keep, { forMs: 2_000, intervalMs: 50, what: 'the set-aside list stays at the bound' });
    // The kept ones are the newest: every kept sample is newer than every dropped one.
    const kept = gw.handle.buffer.setAsideStore.list({ limit: 10_000 });
    expect(kept.length).toBeGreaterThan(keep / 2);
    expect(Math.min(...kept.map((r) => r.id))).toBeGreaterThan(firstKept.id);
    // The in-memory counts agree with the table.
    const { default: Database } = await import('better-sqlite3');
    await gw.close();
    const db = new Database(join(gw.dir, 'buffer.db'), { readonly: true });
    cleanup.push(async () => db.close());
    const inFile = db.prepare('SELECT count(*) FROM set_aside').pluck(true).get() as number;
    expect(inFile).toBeLessThanOrEqual(keep);
    // (Kept in memory, read without the file: the counts are not read again after a trim.)
    expect(gw.handle.buffer.setAsideStore.total()).toBe(inFile);
    const trimmed = lines.filter((l) => /keep_set_aside/.test(String(l.msg)));
    expect(trimmed.length).toBe(1);
  }, 120_000);

  it('a variable created upstream gets its set-aside samples back in the queue, and they are delivered (issue 24 §1)', async () => {
    const emu: EmulatorHandle = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const gw = await startTestGateway(emu, { generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: 22 }, interval: 200 }] });
    cleanup.push(() => gw.destroy());
    const setAsideOf = (v: string) => gw.handle.buffer.setAsideStore.count({ variable: v });
    await waitFor(() => setAsideOf('mvr_gen_21') >= 10 && gw.handle.status().uplink.unknown_variables?.count === 2, { timeoutMs: 30_000, what: 'mvr_gen_21 unknown, samples set aside' });
    expect(emu.valueCounts().mvr_gen_21 ?? 0).toBe(0);
    // The operator creates it in the service; the next catalog read (here: now) finds it.
    emu.fixture.addVariable({ id: 'mvr_gen_21', name: 'generated 21', unit: '', machine: 'mch_gen1' });
    const waiting = setAsideOf('mvr_gen_21');
    await gw.handle.unknown.readCatalogNow();
    await waitFor(() => setAsideOf('mvr_gen_21') === 0, { timeoutMs: 30_000, what: 'mvr_gen_21 requeued' });
    await waitFor(() => (emu.valueCounts().mvr_gen_21 ?? 0) >= waiting, { timeoutMs: 30_000, what: 'its set-aside samples delivered' });
    expect(gw.handle.status().uplink.unknown_variables?.count).toBe(1);
    // mvr_gen_22 is still unknown: its samples stay set aside.
    expect(setAsideOf('mvr_gen_22')).toBeGreaterThan(0);
    expect(await gw.handle.metrics.registry.metrics()).toMatch(/gateway_set_aside_requeued_samples_total\{reason="variable_created"\} [1-9]/);
  }, 90_000);
});
