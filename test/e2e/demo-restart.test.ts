import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { firstBusyPort } from '../../src/sim/plant.js';
import { ROOT } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 14: `edge-gateway demo` restarts its gateway while the simulated plant keeps producing; the
 * gap of Press 1 is read back from the OPC UA server's history and every historized value of the
 * gap reaches the service; the other sources' gaps become gap annotations; SIGTERM after the
 * restart still stops everything with exit code 0. The story runs squeezed into seconds.
 */

const cleanup: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function freePortBlock(n = 5): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 40_000);
    if (!(await firstBusyPort(Array.from({ length: n }, (_, i) => ({ port: base + i }))))) return base;
  }
  throw new Error('no block of free ports found');
}

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return (await res.json()) as T;
}

describe('edge-gateway demo: the gateway restart (issue 14)', () => {
  it("fills Press 1's gap from history, annotates the other sources' gaps, and still stops on SIGTERM", async () => {
    const base = await freePortBlock();
    const dir = mkdtempSync(join(tmpdir(), 'demo-restart-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const args = ['--ports-from', String(base), '--data-dir', dir, '--downtime-after', '3s', '--downtime', '11s', '--outage-after', '5s', '--outage', '2s', '--restart-after', '18s', '--restart', '8s'];
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'demo', ...args], { cwd: ROOT, env: { ...process.env, GATEWAY_CLIENT_SECRET: undefined } });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    cleanup.push(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    const what = (w: string) => ({ what: `${w}\n--- stdout:\n${out}\n--- stderr (tail):\n${err.slice(-3000)}` });
    const emulator = `http://127.0.0.1:${base}/_emulator`;
    const gateway = `http://127.0.0.1:${base + 1}`;

    await waitFor(() => out.includes('restart: the gateway stops'), { timeoutMs: 90_000, intervalMs: 250, ...what('the restart') });
    const filledLine = await waitFor(() => out.split('\n').find((l) => /gap of press1 .* filled from the OPC UA server's history: \d+ values read back/.test(l)), { timeoutMs: 90_000, intervalMs: 250, ...what("Press 1's gap filled") });
    expect(Number(/: (\d+) values read back/.exec(filledLine)![1])).toBeGreaterThan(0);

    // The ledger of the restarted gateway, through its API.
    type Gap = { source: string; from: number; to: number | null; reason: string; filled: string; annotation: { state: string; external_id: string } | null };
    const gaps = (await getJson<{ gaps: Gap[] }>(`${gateway}/api/gaps?state=all&limit=20`)).gaps;
    const press = gaps.find((g) => g.source === 'press1' && g.reason === 'gateway_stopped');
    expect(press?.filled).toBe('yes');
    expect(press!.to! - press!.from).toBeGreaterThan(6_000);

    // Every temperature value Press 1 historized in the gap is upstream: the simulator changes it
    // every second, so the gap holds one value per second of it.
    // (Committed by now; delivered by the uplink shortly after.)
    const expected = Math.floor((press!.to! - press!.from) / 1_000) - 3;
    const inGap = await waitFor(
      async () => {
        const values = await getJson<Array<{ timestamp: string }>>(`${emulator}/values?machine_variable_id=mvr_press1_temperature`);
        const stamps = values.map((v) => Date.parse(v.timestamp)).filter((t) => t > press!.from + 1_000 && t < press!.to! - 1_000).sort((a, b) => a - b);
        return stamps.length >= expected ? stamps : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500, ...what(`at least ${expected} temperature values of the gap upstream`) },
    );
    const holes = inGap.slice(1).map((t, i) => t - inGap[i]);
    expect(Math.max(...holes)).toBeLessThan(2_500);

    // Mixer 1 has no history: its gap is annotated upstream, once.
    const annotation = await waitFor(
      async () => (await getJson<Array<{ text: string; external_id: string | null }>>(`${emulator}/annotations`)).filter((a) => a.text === 'No data from Mixer 1 (Modbus): gateway stopped'),
      { timeoutMs: 30_000, intervalMs: 500, ...what('the Mixer 1 gap annotation') },
    );
    expect(annotation).toHaveLength(1);
    await waitFor(() => out.includes('gap annotation stored upstream: "No data from Mixer 1 (Modbus): gateway stopped"'), { timeoutMs: 10_000, ...what('the gap annotation message') });

    const stopAsked = Date.now();
    child.kill('SIGTERM');
    const code = await exited;
    expect(code, err.slice(-3000)).toBe(0);
    expect(Date.now() - stopAsked).toBeLessThan(10_000);
    expect(out).toContain('demo stopped.');
  }, 180_000);
});
