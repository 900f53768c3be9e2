import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { firstBusyPort } from '../../src/sim/plant.js';
import { ROOT, runCli } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

/**
 * `edge-gateway demo` (what `npm start` runs) as a child process from the sources, with the story
 * squeezed into seconds and on free ports: every protocol of the simulated plant reaches the
 * emulator, the scripted stop of Press 1 becomes a downtime annotation upstream, a short outage of
 * the tracking service is caught up without a gap, and SIGTERM stops everything with exit code 0.
 */

const cleanup: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** N consecutive free ports on 127.0.0.1 (the demo's --ports-from takes five). */
async function freePortBlock(n = 5): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 40_000);
    if (!(await firstBusyPort(Array.from({ length: n }, (_, i) => ({ port: base + i }))))) return base;
  }
  throw new Error('no block of free ports found');
}

interface Demo {
  child: ChildProcessWithoutNullStreams;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
}

function startDemo(args: string[]): Demo {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'demo', ...args], { cwd: ROOT, env: { ...process.env, GATEWAY_CLIENT_SECRET: undefined } });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  cleanup.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { child, out: () => out, err: () => err, exited };
}

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return (await res.json()) as T;
}

type Value = { timestamp: string; value: number };

describe('edge-gateway demo: the simulated plant', () => {
  it('delivers OPC UA, Modbus, MQTT and Sparkplug B values, records the scripted downtime, catches up after an outage and stops on SIGTERM', async () => {
    const base = await freePortBlock();
    const dir = mkdtempSync(join(tmpdir(), 'demo-plant-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const emulator = `http://127.0.0.1:${base}/_emulator`;
    const gateway = `http://127.0.0.1:${base + 1}`;
    const demo = startDemo(['--ports-from', String(base), '--data-dir', dir, '--downtime-after', '3s', '--downtime', '11s', '--outage-after', '6s', '--outage', '3s']);
    const what = (w: string) => ({ what: `${w}\n--- stdout:\n${demo.out()}\n--- stderr (tail):\n${demo.err().slice(-3000)}` });

    // Watch the emulator's fault setting to learn, from outside, when the outage really was.
    let outageSeen: { from: number; to: number } | null = null;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        try {
          const f = await getJson<{ outage_seconds: number }>(`${emulator}/faults`);
          const now = Date.now();
          if (f.outage_seconds > 0) outageSeen = { from: outageSeen?.from ?? now, to: now };
        } catch {
          /* not started yet, or stopped */
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    cleanup.push(async () => {
      watching = false;
      await watcher;
    });

    // Every protocol of the plant reaches the tracking service.
    const values = (id: string) => getJson<Value[]>(`${emulator}/values?machine_variable_id=${id}`);
    const protocols = {
      'OPC UA': 'mvr_press1_temperature',
      Modbus: 'mvr_mixer1_temperature',
      'MQTT JSON': 'mvr_packer1_rate',
      'Sparkplug B': 'mvr_oven1_temperature',
    };
    for (const [protocol, id] of Object.entries(protocols)) {
      await waitFor(async () => (await values(id)).length >= 2, { timeoutMs: 60_000, intervalMs: 250, ...what(`${protocol} values (${id}) upstream`) });
    }
    const oven = await values('mvr_oven1_temperature');
    expect(oven.every((v) => v.value > 150 && v.value < 200)).toBe(true);

    // The outage happened, and the gateway says it caught up.
    await waitFor(() => demo.out().includes('backlog caught up'), { timeoutMs: 60_000, intervalMs: 250, ...what('the caught-up message') });
    const window = outageSeen as { from: number; to: number } | null;
    expect(window, 'the outage was observed').not.toBeNull();
    const stats = await getJson<{ dropped_connections: number; requests: Record<string, Record<string, number>> }>(`${emulator}/stats`);
    expect(stats.dropped_connections).toBeGreaterThan(0);

    // Back to the live tail: nothing old is left in the buffer.
    const status = await getJson<{ buffer: { samples: number; oldest_unsent_age_s: number | null } }>(`${gateway}/status`);
    expect(status.buffer.oldest_unsent_age_s ?? 0).toBeLessThan(5);

    // What was read during the outage is upstream, without a gap: Packer 1 publishes once a second
    // (payload timestamps) and Mixer 1 is polled once a second.
    for (const id of ['mvr_packer1_rate', 'mvr_mixer1_temperature']) {
      const from = window!.from - 1_000;
      const to = window!.to + 1_000;
      const stamps = (await values(id)).map((v) => Date.parse(v.timestamp)).filter((t) => t >= from && t <= to);
      expect(stamps.length, `${id} values during the outage`).toBeGreaterThanOrEqual(Math.floor((to - from) / 1_000) - 1);
      const gaps = stamps.slice(1).map((t, i) => t - stamps[i]);
      expect(Math.max(...gaps), `${id}: largest gap between values around the outage (ms)`).toBeLessThan(2_500);
    }

    // The scripted stop of Press 1 (11 s) became a range annotation upstream.
    const annotation = await waitFor(
      async () => {
        const all = await getJson<Array<{ type: string; text: string; started_at?: string; ended_at?: string; machine_variables: Array<{ id: string }> }>>(`${emulator}/annotations`);
        return all.find((a) => a.type === 'range' && a.text.includes('Press 1'));
      },
      { timeoutMs: 60_000, intervalMs: 250, ...what('the downtime annotation upstream') },
    );
    const lasted = Date.parse(annotation.ended_at!) - Date.parse(annotation.started_at!);
    expect(lasted).toBeGreaterThan(9_000);
    expect(lasted).toBeLessThan(14_000);
    expect(annotation.machine_variables.map((v) => v.id)).toContain('mvr_press1_state');
    await waitFor(() => demo.out().includes('downtime annotation stored upstream: "Press 1'), { timeoutMs: 10_000, ...what('the annotation message') });

    // Issue 26: Press 1's own alarms during the stop became reason-coded ranges, printed beside the
    // detector's: the jam for the whole stop, the overtemperature from halfway through.
    const alarms = await waitFor(
      async () => {
        const all = await getJson<Array<{ type: string; text: string; external_id: string; started_at?: string; ended_at?: string; machine_variables: Array<{ id: string }> }>>(`${emulator}/annotations`);
        const jam = all.find((a) => a.type === 'range' && a.text.startsWith('JAM: Material jam at the infeed (unplanned). Alarm "Jam"'));
        const ot = all.find((a) => a.type === 'range' && a.text.startsWith('OVERTEMP: Hydraulic oil overtemperature (unplanned). Alarm "Overtemperature"'));
        return jam && ot ? { jam, ot } : null;
      },
      { timeoutMs: 60_000, intervalMs: 250, ...what('the alarm annotations upstream') },
    );
    const span = (a: { started_at?: string; ended_at?: string }) => Date.parse(a.ended_at!) - Date.parse(a.started_at!);
    expect(span(alarms.jam)).toBeGreaterThan(9_000);
    expect(span(alarms.jam)).toBeLessThan(14_000);
    expect(span(alarms.ot)).toBeGreaterThan(3_000);
    expect(span(alarms.ot)).toBeLessThan(span(alarms.jam));
    expect(alarms.jam.external_id).toMatch(/^demo-alarmr-/);
    expect(alarms.jam.machine_variables.map((v) => v.id)).toContain('mvr_press1_state');
    await waitFor(() => demo.out().includes('alarm annotation stored upstream: "JAM: Material jam at the infeed'), { timeoutMs: 10_000, ...what('the alarm annotation message') });
    expect(demo.out()).toContain("Press 1's OPC UA server raises the alarm Jam (OffNormalAlarm, severity 700)");

    // SIGTERM stops everything, cleanly and quickly.
    const stopAsked = Date.now();
    demo.child.kill('SIGTERM');
    const code = await demo.exited;
    expect(code, demo.err().slice(-3000)).toBe(0);
    expect(Date.now() - stopAsked).toBeLessThan(10_000);
    expect(demo.out()).toContain('demo stopped.');
  }, 150_000);

  it('names the port that is in use and the setting behind it', async () => {
    const base = await freePortBlock();
    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen(base + 2, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => blocker.close(() => r())));
    const dir = mkdtempSync(join(tmpdir(), 'demo-plant-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const r = await runCli(['demo', '--ports-from', String(base), '--data-dir', dir]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`port ${base + 2}`);
    expect(r.err).toContain('OPC UA server of Press 1');
    expect(r.err).toContain('--ports-from');
  });
});
