import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import type { Clock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { testConfigInput } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The console tells time by the gateway's clock (the one startGateway is given), never by
 * Date.now: the variable list's `now`, the backlog chart's points, the live ticks' `t` and the
 * catalog's `read_at`. The gateway here runs three days behind the machine's clock.
 */
const BEHIND_MS = 3 * 86_400_000;
const clock: Clock = { now: () => Date.now() - BEHIND_MS, monotonic: () => performance.now() };
/** On the gateway's clock, give or take a minute (a busy machine). */
const onGatewayClock = (t: number) => Math.abs(t - clock.now()) < 60_000;

let emu: EmulatorHandle;
let gw: GatewayHandle;
let dir: string;
let base: string;

beforeAll(async () => {
  emu = await startEmulator({ port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'gw-console-clock-'));
  const { config } = validateConfig(
    testConfigInput(emu, dir, {
      http: { enabled: true, port: 0 },
      generator: [{ name: 'gen', variables: ['mvr_press1_temperature'], interval: '200ms' }],
    }),
  );
  gw = await startGateway(config, { logger: silentLogger(), clock });
  base = gw.httpUrl!;
}, 60_000);

afterAll(async () => {
  await gw?.close();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function json<T>(path: string): Promise<T> {
  const r = await fetch(`${base}${path}`);
  expect(r.status, path).toBe(200);
  return (await r.json()) as T;
}

/** The first `tick` event of the live stream. */
async function firstTick(): Promise<{ t: number }> {
  const ctrl = new AbortController();
  const res = await fetch(`${base}/console/api/events`, { signal: ctrl.signal });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the stream ended before a tick');
      buf += value;
      const m = /event: tick\ndata: (.*)\n\n/.exec(buf);
      if (m) return JSON.parse(m[1]) as { t: number };
    }
  } finally {
    ctrl.abort();
  }
}

describe('console time', () => {
  it('comes from the gateway clock: variable list, backlog, live ticks, catalog', async () => {
    const list = await waitFor(async () => {
      const l = await json<{ now: number; variables: Array<{ id: string; ts: number | null }> }>('/console/api/variables');
      return l.variables.some((v) => v.id === 'mvr_press1_temperature' && v.ts !== null) ? l : null;
    }, { what: 'a sample in the variable list' });
    expect(onGatewayClock(list.now), `now ${new Date(list.now).toISOString()}`).toBe(true);

    const overview = await json<{ backlog: Array<[number, number]> }>('/console/api/overview');
    expect(overview.backlog.length).toBeGreaterThan(0);
    expect(overview.backlog.every(([at]) => onGatewayClock(at)), JSON.stringify(overview.backlog)).toBe(true);

    const tick = await firstTick();
    expect(onGatewayClock(tick.t), `t ${new Date(tick.t).toISOString()}`).toBe(true);

    const catalog = await json<{ read_at: number }>('/console/api/catalog');
    expect(onGatewayClock(catalog.read_at), `read_at ${new Date(catalog.read_at).toISOString()}`).toBe(true);
  }, 60_000);
});
