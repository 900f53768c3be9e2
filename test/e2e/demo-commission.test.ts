import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { firstBusyPort } from '../../src/sim/plant.js';
import { ROOT, runCli } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 24 §2, "make the demo commissionable", against the real `edge-gateway demo` in a child
 * process: it runs from a configuration file written into its data folder (so the console's Apply
 * writes it), prints the console's address, and its simulated devices can be taken down and
 * brought back from the CLI and from the console's button: a real disconnect, a gap, a reconnect.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

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

function startDemo(args: string[]) {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'demo', ...args], { cwd: ROOT, env: { ...process.env, GATEWAY_CLIENT_SECRET: undefined } });
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

interface Gap {
  source: string;
  from: number;
  to: number | null;
  reason: string;
}
interface Status {
  sources: Array<{ name: string; state: string }>;
}

describe.skipIf(!available)('edge-gateway demo: commissionable', () => {
  it('runs from a file in its data folder that Apply writes, prints the console, and switches devices down and up for real (CLI and console)', async () => {
    const base = await freePortBlock();
    const dir = mkdtempSync(join(tmpdir(), 'demo-commission-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const gateway = `http://127.0.0.1:${base + 1}`;
    // The story's scripted events far away: only the switches change the plant here.
    const demo = startDemo(['--ports-from', String(base), '--data-dir', dir, '--downtime-after', '600s', '--outage-after', '600s', '--restart-after', '600s']);
    const what = (w: string) => ({ what: `${w}\n--- stdout:\n${demo.out()}\n--- stderr (tail):\n${demo.err().slice(-3000)}` });

    // (c) the banner names the console.
    await waitFor(() => demo.out().includes(`console   ${gateway}/console/`), { timeoutMs: 90_000, intervalMs: 250, ...what('the console in the banner') });
    const file = join(dir, 'demo.yaml');
    // Printed after the banner, in its own line: waited for, not assumed to be there already.
    await waitFor(() => demo.out().includes(`configuration written to ${file}`), { timeoutMs: 30_000, intervalMs: 250, ...what('the note that the configuration was written') });
    const written = readFileSync(file, 'utf8');
    expect(written).toMatch(/^# Written by `edge-gateway demo` at its first start/);
    expect(written).toContain(`opc.tcp://127.0.0.1:${base + 2}/UA/Press1`);
    expect(written).toContain('# Press 1: a press PLC with an embedded OPC UA server'); // the template's comments kept
    const read = await getJson<{ path: string | null }>(`${gateway}/console/api/config`);
    expect(read.path).toBe(file);

    const status = () => getJson<Status>(`${gateway}/status`);
    const stateOf = async (name: string) => (await status()).sources.find((s) => s.name === name)?.state;
    const gaps = async () => (await getJson<{ gaps: Gap[] }>(`${gateway}/api/gaps?state=all`)).gaps;
    for (const s of ['press1', 'modbus']) await waitFor(async () => (await stateOf(s)) === 'connected', { timeoutMs: 60_000, ...what(`${s} connected`) });

    // (b) the CLI: Press 1's OPC UA server really stops; the gateway loses it and records a gap.
    const down = await runCli(['demo', 'device', 'press1', 'down', '--data-dir', dir]);
    expect(down.code, down.err).toBe(0);
    expect(down.out).toMatch(/press1\s+DOWN/);
    await waitFor(async () => (await stateOf('press1')) !== 'connected', { timeoutMs: 30_000, ...what('press1 lost') });
    await waitFor(async () => (await gaps()).some((g) => g.source === 'press1' && g.reason === 'source_disconnected' && g.to === null), { timeoutMs: 30_000, ...what('an open gap of press1') });
    const up = await runCli(['demo', 'device', 'press1', 'up', '--data-dir', dir]);
    expect(up.code, up.err).toBe(0);
    expect(up.out).toMatch(/press1\s+up/);
    await waitFor(async () => (await stateOf('press1')) === 'connected', { timeoutMs: 60_000, ...what('press1 reconnected on the same port') });
    await waitFor(async () => (await gaps()).some((g) => g.source === 'press1' && g.to !== null), { timeoutMs: 30_000, ...what('the gap of press1 closed') });
    const unknown = await runCli(['demo', 'device', 'press9', 'down', '--data-dir', dir]);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('no simulated device "press9"');

    // (b) the console's button, and (a) Apply on the demo's file.
    const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
    cleanup.push(() => browser.close());
    const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
    await page.goto(`${gateway}/console#/overview`);
    await page.getByTestId('demo-switch-mixer1').click();
    await waitFor(async () => (await page.getByTestId('demo-state-mixer1').textContent())?.startsWith('down since'), { timeoutMs: 30_000, ...what('mixer1 shown down') });
    await waitFor(async () => (await gaps()).some((g) => g.source === 'modbus' && g.to === null), { timeoutMs: 30_000, ...what('an open gap of Mixer 1') });
    await page.getByTestId('demo-switch-mixer1').click();
    await waitFor(async () => (await page.getByTestId('demo-state-mixer1').textContent()) === 'up', { timeoutMs: 30_000, ...what('mixer1 shown up') });
    await waitFor(async () => (await gaps()).some((g) => g.source === 'modbus' && g.to !== null), { timeoutMs: 30_000, ...what('the gap of Mixer 1 closed') });
    expect(demo.out()).toContain('Mixer 1 taken down (switch)');

    await page.goto(`${gateway}/console#/build`);
    await page.getByTestId('tab-config').click();
    await waitFor(async () => (await page.getByTestId('check-state').textContent()) === 'check passes', { timeoutMs: 30_000, ...what('the demo file checks') });
    expect(await page.getByTestId('apply-reason').count()).toBe(0);
    const text = await page.getByTestId('config-text').inputValue();
    await page.getByTestId('config-text').fill(text.replace('status_interval: 5s', 'status_interval: 4s'));
    await waitFor(async () => (await page.getByTestId('check-state').textContent()) === 'check passes' && (await page.getByTestId('apply-config').isEnabled()), { timeoutMs: 30_000 });
    await page.getByTestId('apply-config').click();
    await page.getByTestId('confirm-apply').click();
    await waitFor(async () => (await page.getByTestId('apply-note').textContent())?.startsWith(`Written to ${file}`), { timeoutMs: 30_000, ...what('Apply written') });
    expect(readFileSync(file, 'utf8')).toContain('status_interval: 4s');

    demo.child.kill('SIGTERM');
    expect(await demo.exited, demo.err().slice(-3000)).toBe(0);

    // A second start keeps the file (the edit stays), and refuses ports the file does not listen on.
    const other = await runCli(['demo', '--ports-from', String(base + 10), '--data-dir', dir]);
    expect(other.code).toBe(2);
    expect(other.err).toContain(`--ports-from ${base + 10}: the demo runs from ${file}`);
    expect(readFileSync(file, 'utf8')).toContain('status_interval: 4s');
  }, 240_000);
});
