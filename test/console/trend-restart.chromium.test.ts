import BetterSqlite3 from 'better-sqlite3';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify as toYaml } from 'yaml';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { ROOT } from '../helpers/cli.js';
import { testConfigInput } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 24 §4: the trend of a variable survives a restart of the gateway. A real gateway process
 * (generator source, counter values 0, 1, 2, … every 200 ms from its start, so buckets before and
 * after a restart differ) runs on a data directory, is stopped with SIGTERM and later killed with
 * SIGKILL, and started again on the same directory each time; the variable's page in Chromium then
 * shows the buckets from before the restart with their values (read from the chart's legend under
 * the cursor, bucket by bucket), equal to what the console showed before.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);
const VARIABLE = 'mvr_gen_1';
const BUCKET_MS = 10_000;

type Bucket = [start: number, min: number, max: number, count: number];

let emu: EmulatorHandle;
let browser: Browser;
let page: Page;
let dir: string;
let configFile: string;
let gw: { child: ChildProcess; url: string; out: () => string; exited: Promise<number | null> } | null = null;

/** Starts `edge-gateway run` on the test's configuration and data directory; resolves once it serves. */
async function startGateway(): Promise<NonNullable<typeof gw>> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'run', '--config', configFile], { cwd: ROOT, env: { ...process.env, GATEWAY_CLIENT_SECRET: undefined } });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const url = await waitFor(
    () => {
      const line = out.split('\n').find((l) => l.includes('"gateway started"'));
      return line ? (JSON.parse(line) as { http: string }).http : null;
    },
    { timeoutMs: 60_000, intervalMs: 100, what: `the gateway to start\n${out}` },
  );
  return { child, url, out: () => out, exited };
}

async function trendOf(url: string): Promise<Bucket[]> {
  const res = await fetch(`${url}/console/api/variables/${VARIABLE}`);
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  return ((await res.json()) as { trend: Bucket[] }).trend;
}

/** The newest bucket start the buffer file holds in its trend table (read beside the running gateway). */
function newestKept(): number {
  const db = new BetterSqlite3(join(dir, 'buffer.db'), { readonly: true, timeout: 10_000 });
  try {
    return (db.prepare('SELECT max(to_ts) FROM trend').pluck().get() as number | null) ?? -Infinity;
  } finally {
    db.close();
  }
}

/** The legend's time label of a bucket: the page runs in UTC. */
const label = (start: number) => new Date(start).toISOString().slice(0, 19).replace('T', ' ');
const num = (s: string) => Number(s.replace(/,/g, ''));

/**
 * Moves the cursor across the variable page's trend chart and collects what the legend shows at
 * each point: time label → [min, max]. Waits until every bucket of `expected` was seen with its
 * values (the page reloads its data every 5 s; a sweep may meet a new bucket).
 */
async function expectChartShows(url: string, expected: Bucket[]): Promise<void> {
  await page.goto(`${url}/console#/variables/${VARIABLE}`);
  const chart = page.getByTestId('trend-chart');
  await chart.locator('.u-over').waitFor({ timeout: 20_000 });
  const seen = new Map<string, [number, number]>();
  const missing = () => expected.filter(([start, min, max]) => {
    const s = seen.get(label(start));
    return !s || s[0] !== min || s[1] !== max;
  });
  await waitFor(
    async () => {
      const box = (await chart.locator('.u-over').boundingBox())!;
      const steps = 120;
      for (let i = 0; i <= steps; i++) {
        await page.mouse.move(box.x + 1 + ((box.width - 2) * i) / steps, box.y + box.height / 2);
        // [time, max, min] (the chart's series: x, max, min)
        const v = await chart.locator('.u-legend .u-value').allTextContents();
        if (v.length === 3 && v[0] !== '--') seen.set(v[0], [num(v[2]), num(v[1])]);
      }
      return missing().length === 0;
    },
    { timeoutMs: 30_000, intervalMs: 500, what: `the chart's legend to show ${JSON.stringify(expected.map((b) => [label(b[0]), b[1], b[2]]))}; seen ${JSON.stringify([...seen])}` },
  );
}

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'trend-restart-'));
  configFile = join(dir, 'gateway.yaml');
  const config = testConfigInput(emu, dir, {
    log: { level: 'info', format: 'json' },
    http: { enabled: true, port: 0 },
    generator: [{ name: 'gen', variables: [VARIABLE], interval: '200ms', shape: 'counter' }],
  });
  writeFileSync(configFile, toYaml(config));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  page = await (await browser.newContext({ viewport: { width: 1440, height: 900 }, timezoneId: 'UTC' })).newPage();
}, 90_000);

afterAll(async () => {
  if (gw && gw.child.exitCode === null && gw.child.signalCode === null) {
    gw.child.kill('SIGKILL');
    await gw.exited;
  }
  await browser?.close();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!available)('the trend of a variable across a restart of the gateway', () => {
  let beforeStop: Bucket[] = [];

  it('after SIGTERM: the console keeps every bucket from before the stop, the open one too, and the page shows the closed ones', async () => {
    gw = await startGateway();
    const url = gw.url;
    // Three buckets closed (30 s and more of samples), and the open one.
    beforeStop = await waitFor(
      async () => {
        const t = await trendOf(url);
        return t.filter(([start]) => start + BUCKET_MS <= Date.now()).length >= 3 ? t : null;
      },
      { timeoutMs: 90_000, intervalMs: 500, what: 'three closed trend buckets' },
    );
    gw.child.kill('SIGTERM');
    expect(await gw.exited).toBe(0);
    const open = beforeStop.at(-1)!;

    const restartedAt = Date.now();
    gw = await startGateway();
    // Read back a row per event-loop turn after the start.
    const closed = beforeStop.slice(0, -1);
    const restarted = gw.url;
    const after = await waitFor(
      async () => {
        const t = await trendOf(restarted);
        return t.some(([start]) => start === open[0]) ? t : null;
      },
      { timeoutMs: 20_000, intervalMs: 250, what: 'the trend read back after the restart' },
    ).catch(() => trendOf(restarted));
    // The closed buckets as they were; the open one with at least what the console showed (samples
    // came until the stop; those after the restart are merged into it).
    for (const b of closed) expect(after).toContainEqual(b);
    const reopened = after.find(([start]) => start === open[0]);
    expect(reopened, `the bucket open at the stop, ${label(open[0])}`).toBeDefined();
    expect(reopened![2]).toBeGreaterThanOrEqual(open[2]);
    expect(reopened![3]).toBeGreaterThanOrEqual(open[3]);
    // The restarted gateway's samples are stamped after its start: buckets that ended before it
    // and are there, as they were, came from the file.
    for (const b of closed) expect(b[0] + BUCKET_MS).toBeLessThanOrEqual(restartedAt);
    await expectChartShows(gw.url, closed);
  }, 180_000);

  it('after SIGKILL: the page shows the buckets kept before the kill (all but the last one or two)', async () => {
    if (!gw) throw new Error('no gateway running (the SIGTERM case failed to start one)');
    const url = gw.url;
    // Two more buckets closed in this run, and kept in the file by the buffer's schedule.
    const started = Date.now();
    const kept = await waitFor(
      () => {
        const k = newestKept();
        return k >= Math.floor(started / BUCKET_MS) * BUCKET_MS + BUCKET_MS ? k : null;
      },
      { timeoutMs: 90_000, intervalMs: 500, what: 'two buckets of this run kept in the buffer file' },
    );
    const beforeKill = await trendOf(url);
    gw.child.kill('SIGKILL');
    await gw.exited;
    const keptBuckets = beforeKill.filter(([start]) => start <= kept);
    // Buckets from before the first restart too (this test's first case).
    expect(keptBuckets.length).toBeGreaterThanOrEqual(4);

    gw = await startGateway();
    const restarted = gw.url;
    const after = await waitFor(
      async () => {
        const t = await trendOf(restarted);
        return t.some(([start]) => start === keptBuckets[0][0]) ? t : null;
      },
      { timeoutMs: 20_000, intervalMs: 250, what: 'the trend read back after the restart' },
    ).catch(() => trendOf(restarted));
    for (const b of keptBuckets) expect(after).toContainEqual(b);
    await expectChartShows(gw.url, keptBuckets);
    gw.child.kill('SIGTERM');
    expect(await gw.exited).toBe(0);
  }, 180_000);
});
