import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { DEMO_FIXTURE, startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { SetAsideStore } from '../../src/buffer/set-aside.js';
import { openTestBuffer } from '../helpers/buffer.js';
import { startTestGateway, testConfigInput, type TestGateway, withBufferFile } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { runCli } from '../helpers/cli.js';
import { gatewayStore } from '../../src/runtime/store-schemas.js';

const ROOT = join(import.meta.dirname, '..', '..');
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

const T0 = Date.parse('2026-11-22T06:00:00.000Z');
const WITH_NEW = { ...DEMO_FIXTURE, machine_variables: [...DEMO_FIXTURE.machine_variables, { id: 'mvr_new_1', name: 'added later', machine: 'mch_press1', unit: 'bar' }] };

async function emulator(port = 0, fixture: unknown = DEMO_FIXTURE): Promise<EmulatorHandle> {
  const emu = await startEmulator({ port, fixture: fixture as typeof DEMO_FIXTURE });
  cleanup.push(() => emu.close());
  return emu;
}

async function api(base: string, method: 'GET' | 'POST', path: string, body?: unknown) {
  const res = await request(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

function cli(args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'set-aside', ...args], { encoding: 'utf8', cwd: ROOT, timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe('set-aside: inspect, requeue, drop', () => {
  it('a variable created upstream later: its set-aside samples are requeued through the running gateway and delivered', async () => {
    const emu = await emulator();
    const gw: TestGateway = await startTestGateway(emu, { http: { enabled: true, port: 0 } });
    cleanup.push(() => gw.destroy());
    await gw.handle.buffer.append([
      ...Array.from({ length: 5 }, (_, i) => ({ variable: 'mvr_new_1', ts: T0 + i, value: i })),
      ...Array.from({ length: 20 }, (_, i) => ({ variable: 'mvr_gen_1', ts: T0 + i, value: i })),
    ]);
    await waitFor(() => gw.handle.buffer.stats().rows === 0, { what: 'drained' });
    const base = gw.handle.httpUrl!;
    const listed = await api(base, 'GET', '/api/set-aside');
    expect(listed.body.total).toBe(5);
    const rows = listed.body.rows as Array<{ variable: string; reason: string; path: string }>;
    expect(rows[0]).toMatchObject({ variable: 'mvr_new_1', path: 'sync' });
    expect(rows[0].reason).toMatch(/mvr_new_1/);

    // The operator creates the variable upstream (here: the emulator restarts with it), then requeues.
    const port = emu.port;
    await emu.close();
    const emu2 = await emulator(port, WITH_NEW);
    const bad = await api(base, 'POST', '/api/set-aside/requeue', { varible: 'mvr_new_1' });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('varible');
    const requeued = await api(base, 'POST', '/api/set-aside/requeue', { variable: 'mvr_new_1' });
    expect(requeued.body).toEqual({ requeued: 5, remaining: 0 });
    await waitFor(() => (emu2.valueCounts()['mvr_new_1'] ?? 0) === 5, { what: 'requeued samples delivered' });
    expect((await api(base, 'GET', '/api/set-aside')).body.total).toBe(0);
  });

  it('the CLI works on the buffer file when no gateway runs: list, drop by id, requeue all', async () => {
    const emu = await emulator();
    const dir = mkdtempSync(join(tmpdir(), 'gw-setaside-'));
    const gw = await startTestGateway(emu, {}, { dir });
    await gw.handle.buffer.append([
      { variable: 'mvr_new_1', ts: T0, value: 1 },
      { variable: 'mvr_new_1', ts: T0 + 1, value: 2 },
      { variable: 'mvr_nope_2', ts: T0 + 2, value: 3 },
      { variable: 'mvr_gen_1', ts: T0 + 3, value: 4 },
    ]);
    await waitFor(() => gw.handle.buffer.stats().rows === 0, { what: 'drained' });
    await gw.close();
    const db = join(dir, 'buffer.db');
    const list = cli(['list', '--db', db]);
    expect(list.code).toBe(0);
    expect(list.out).toContain('3 sample(s) set aside');
    expect(list.out).toContain('mvr_nope_2');
    const json = JSON.parse(cli(['list', '--db', db, '--json']).out) as { rows: Array<{ id: number; variable: string }> };
    const nope = json.rows.find((r) => r.variable === 'mvr_nope_2')!;
    expect(cli(['drop', '--db', db, '--id', String(nope.id)]).out).toContain('dropped 1');
    expect(cli(['requeue', '--db', db]).code).toBe(2); // needs a filter
    expect(cli(['requeue', '--db', db, '--all']).out).toContain('requeued 2');
    const b = openTestBuffer({ path: db, dir });
    expect(b.rows().map((r) => r.variable)).toEqual(['mvr_new_1', 'mvr_new_1']);
    await b.close();
    // A gateway opening the file delivers them once the variable exists.
    const port = emu.port;
    await emu.close();
    const emu2 = await emulator(port, WITH_NEW);
    const again = await startTestGateway(emu2, {}, { dir });
    cleanup.push(() => again.destroy());
    await waitFor(() => (emu2.valueCounts()['mvr_new_1'] ?? 0) === 2, { what: 'delivered after requeue' });
  });

  it('with --config and a running gateway, the CLI goes through its API', async () => {
    const emu = await emulator();
    const dir = mkdtempSync(join(tmpdir(), 'gw-setaside-'));
    const gw = await startTestGateway(emu, { http: { enabled: true, port: 0 } }, { dir });
    cleanup.push(() => gw.destroy());
    await gw.handle.buffer.append([{ variable: 'mvr_nope_3', ts: T0, value: 1 }]);
    await waitFor(() => gw.handle.status().set_aside.samples === 1, { what: 'set aside' });
    const port = Number(new URL(gw.handle.httpUrl!).port);
    const cfg = join(dir, 'gw.yaml');
    writeFileSync(cfg, stringify(testConfigInput(emu, dir, { http: { enabled: true, port } })));
    const r = await runCli(['set-aside', 'drop', '--config', cfg, '--variable', 'mvr_nope_3']);
    expect(r.err).toBe('');
    expect(r.out).toContain('dropped 1 sample(s) (through the running gateway)');
    expect(gw.handle.status().set_aside.samples).toBe(0);
  });
});

describe('set-aside requeue in steps (issue 21 §1)', () => {
  it('the CLI through a running gateway whose buffer refuses (refuse_new, full): says why, exits non-zero, keeps every sample set aside', async () => {
    const emu = await emulator();
    const dir = mkdtempSync(join(tmpdir(), 'gw-setaside-'));
    const sections = { http: { enabled: true, port: 0 }, buffer: { when_full: 'refuse_new', max_bytes: '1MB' } };
    const gw = await startTestGateway(emu, sections, { dir });
    cleanup.push(() => gw.destroy());
    withBufferFile(gw, (db) =>
      db.prepare(
        `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 59999)
         INSERT INTO set_aside (variable, ts, value, path, reason, created_at) SELECT 'mvr_new_1', ? + i, i, 'sync', 'unknown variable', ? FROM c`,
      )
      .run(T0, T0));
    const port = Number(new URL(gw.handle.httpUrl!).port);
    const cfg = join(dir, 'gw.yaml');
    writeFileSync(cfg, stringify(testConfigInput(emu, dir, { ...sections, http: { enabled: true, port } })));
    const r = await runCli(['set-aside', 'requeue', '--config', cfg, '--all']);
    expect(r.out).toBe('');
    expect(r.err).toMatch(/HTTP 503: 0 sample\(s\) requeued, 60000 stay set aside: refused: buffer full \(buffer\.when_full = refuse_new\)/);
    expect(r.code).toBe(1);
    expect(gw.handle.status().set_aside.samples).toBe(60_000);
  });

  it('stops at the first step the buffer refuses: earlier steps are committed and gone from set-aside, the rest stays, nothing counted as lost', async () => {
    const b = openTestBuffer({ whenFull: 'refuse_new', maxBytes: 5_000_000 });
    cleanup.push(() => b.destroy());
    const db = b.db;
    db.prepare(
      `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 39999)
       INSERT INTO set_aside (variable, ts, value, path, reason, created_at) SELECT 'mvr_late_1', ? + i, i, 'sync', 'unknown variable', ? FROM c`,
    ).run(T0, T0);
    // Once the first step is committed, a busy source fills the buffer past max_bytes.
    let filled = false;
    b.buffer.onChange(() => {
      if (filled) return;
      filled = true;
      void b.buffer.append(Array.from({ length: 200_000 }, (_, i) => ({ variable: 'mvr_busy_1', ts: T0 + i, value: i })));
    });
    const r = await new SetAsideStore(gatewayStore(db)).requeue(b.buffer, { all: true }, { stepRows: 10_000 });
    expect(r.refused).toEqual({ code: 'BUFFER_FULL', reason: expect.stringMatching(/^refused: buffer full \(buffer\.when_full = refuse_new\)/) });
    // Whole steps only, and what left set-aside is exactly what the buffer committed: the oldest ids.
    expect(r.requeued % 10_000).toBe(0);
    expect(r.requeued).toBeGreaterThanOrEqual(10_000);
    expect(r.requeued + r.remaining).toBe(40_000);
    const late = b.rows().filter((x) => x.variable === 'mvr_late_1');
    expect(late.map((x) => x.ts)).toEqual(Array.from({ length: r.requeued }, (_, i) => T0 + i));
    expect(db.prepare('SELECT count(*) AS n, min(id) AS lo FROM set_aside').get()).toEqual({ n: r.remaining, lo: r.requeued + 1 });
    // Set-aside keeps what was refused: not lost.
    expect(b.buffer.stats().droppedTotal).toBe(0);
  });

  it('the counts kept in memory match the table through set-aside, trim, requeue and drop (no count(*) per status read)', async () => {
    const b = openTestBuffer();
    cleanup.push(() => b.destroy());
    const db = b.db;
    const store = b.buffer.setAsideStore;
    const inTable = () => ({
      total: db.prepare('SELECT count(*) FROM set_aside').pluck(true).get() as number,
      perVariable: new Map(db.prepare('SELECT variable, count(*) FROM set_aside GROUP BY variable').raw(true).all() as Array<[string, number]>),
      unknown: db.prepare("SELECT count(*) FROM set_aside WHERE reason LIKE 'unknown machine variable: %'").pluck(true).get() as number,
    });
    const same = () => {
      const t = inTable();
      expect(store.total()).toBe(t.total);
      expect(new Map(store.countsByVariable())).toEqual(t.perVariable);
      expect(store.counts.withReason('unknown machine variable: ')).toBe(t.unknown);
    };
    same(); // read from the (empty) table, then kept
    await b.buffer.append(Array.from({ length: 3_000 }, (_, i) => ({ variable: `mvr_${i % 3}`, ts: T0 + i, value: i })));
    await b.buffer.flush();
    const rows = b.buffer.claimNewest(3_000);
    b.buffer.setAsideGroups([
      { rows: rows.filter((r) => r.variable === 'mvr_0'), info: { path: 'sync', reason: 'unknown machine variable: "mvr_0"' } },
      { rows: rows.filter((r) => r.variable === 'mvr_1'), info: { path: 'sync', reason: 'unknown machine variable: "mvr_1"' } },
      { rows: rows.filter((r) => r.variable === 'mvr_2'), info: { path: 'sync', reason: 'value out of range' } },
    ]);
    same();
    expect(store.trimReason('unknown machine variable: ', 1_500)).toBe(500);
    same();
    const r = await store.requeue(b.buffer, { variable: 'mvr_1' }, { stepRows: 300 });
    expect(r.requeued).toBeGreaterThan(0);
    same();
    expect(store.drop({ variable: 'mvr_2' })).toBe(1_000);
    same();
    expect(store.trimReason('unknown machine variable: ', 0)).toBeGreaterThan(0);
    same();
    expect(store.total()).toBe(0);
  });

  it('requeue in the file (no gateway) moves every sample in steps, each step one transaction', async () => {
    const b = openTestBuffer();
    cleanup.push(() => b.destroy());
    const db = b.db;
    await b.buffer.append([{ variable: 'mvr_live_1', ts: T0, value: -1 }]);
    db.prepare(
      `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 2499)
       INSERT INTO set_aside (variable, ts, value, path, reason, created_at) SELECT 'mvr_late_' || (i % 2), ? + i, i, 'sync', 'unknown variable', ? FROM c`,
    ).run(T0, T0);
    db.prepare("INSERT INTO set_aside (variable, ts, value, path, reason, created_at) VALUES (NULL, NULL, NULL, 'import', 'job note', ?)").run(T0);
    const store = new SetAsideStore(gatewayStore(db));
    expect(store.requeueInFile({ variable: 'mvr_late_1' }, { stepRows: 400 })).toBe(1_250);
    expect(store.count({ all: true })).toBe(1_250);
    const rows = b.rows();
    expect(rows.filter((x) => x.variable === 'mvr_late_1').map((x) => x.value)).toEqual(Array.from({ length: 1_250 }, (_, i) => 2 * i + 1));
    // New seqs above every earlier one, never reused (I3).
    expect(rows[0]).toMatchObject({ variable: 'mvr_live_1' });
    expect(new Set(rows.map((x) => x.seq)).size).toBe(rows.length);
    expect(db.prepare("SELECT value FROM meta WHERE key = 'next_seq'").pluck(true).get()).toBe(String(rows.at(-1)!.seq + 1));
  });
});
