import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmulator } from '../../src/emulator/index.js';
import { startModbusSimulator } from '../../src/sim/modbus-device.js';
import { formatGaps } from '../../src/commands/gaps.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { runCli } from '../helpers/cli.js';
import { holdsFor, waitFor } from '../helpers/wait.js';
import { apiGaps } from '../helpers/gaps.js';

/**
 * Issue 14 §2, §3, §4: gaps recorded with the right reason and times for a Modbus device that
 * stops answering and for a full-buffer drop episode; gap annotations delivered exactly once after
 * an upstream outage. Real peers: the Modbus simulator over TCP, the SQLite buffer, the emulator
 * over HTTP. The device is offline 6 s instead of 30 s: the gap logic does not depend on the length.
 */

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});


describe('gap ledger', () => {
  it('records a Modbus device that stops answering as device_error with its times and variables, and annotates it once after an upstream outage', async () => {
    const sim = await startModbusSimulator({ port: 0, demo: false });
    cleanup.push(() => sim.close());
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const dir = mkdtempSync(join(tmpdir(), 'gw-gaps-'));
    const sections = {
      http: { enabled: true, port: 0 },
      modbus: {
        name: 'modbus',
        reconnect: { initial_delay: 200, max_delay: 400 },
        devices: [
          {
            name: 'mixer1',
            host: '127.0.0.1',
            port: sim.port,
            poll_interval: 100,
            timeout: 300,
            retries: 0,
            registers: [
              { variable: 'mvr_mixer1_speed', table: 'holding', address: 0 },
              { variable: 'mvr_mixer1_level', table: 'holding', address: 1 },
            ],
          },
        ],
      },
      annotations: { site: { external_id: 'plant-demo' }, machines: [{ key: 'mixer1', name: 'Mixer 1', machine_variables: ['mvr_mixer1_speed'] }] },
      gaps: { annotate: true, min_duration: '2s' },
    };
    const gw = await startTestGateway(emu, sections, { dir });
    cleanup.push(() => gw.destroy());
    await waitFor(() => emu.values('mvr_mixer1_speed').length >= 3, { timeoutMs: 30_000, what: 'Modbus values upstream' });

    // The service goes away first, so the annotation has to wait in the outbox.
    emu.setFaults({ outage_seconds: 15 });
    const silentAt = Date.now();
    sim.setDelay(2_000); // longer than the 300 ms timeout: the device stops answering
    const open = await waitFor(async () => (await apiGaps(gw, 'state=open')).find((g) => g.reason === 'device_error'), { timeoutMs: 20_000, what: 'an open device_error gap', intervalMs: 500 });
    expect(open.source).toBe('modbus');
    expect(open.variables).toEqual(['mvr_mixer1_speed', 'mvr_mixer1_level']);
    expect(open.to).toBeNull();
    // It started when the device stopped answering: within the timeout and the poll (plus slack).
    expect(open.from).toBeGreaterThanOrEqual(silentAt - 200);
    expect(open.from).toBeLessThanOrEqual(silentAt + 3_000);
    const metricsOpen = await (await fetch(`${gw.handle.httpUrl}/metrics`)).text();
    expect(metricsOpen).toMatch(/gateway_gaps_open 1/);

    // The device stays silent until the gap is over 5.5 s old (the closed gap is asserted longer than 5 s).
    await waitFor(() => Date.now() - open.from > 5_500, { timeoutMs: 20_000, what: 'a gap over 5.5 s long' });
    sim.setDelay(0);
    const answeringAt = Date.now();
    const closed = await waitFor(async () => (await apiGaps(gw)).find((g) => g.id === open.id && g.to !== null), { timeoutMs: 20_000, what: 'the gap closed', intervalMs: 500 });
    expect(closed.filled).toBe('no');
    expect(closed.to!).toBeGreaterThanOrEqual(answeringAt - 200);
    expect(closed.to!).toBeLessThanOrEqual(answeringAt + 5_000);
    expect(closed.to! - closed.from).toBeGreaterThan(5_000);

    // Annotated at once (queued), delivered once the service is back, exactly once.
    const delivered = await waitFor(async () => (await apiGaps(gw)).find((g) => g.id === open.id && g.annotation?.state === 'delivered'), { timeoutMs: 45_000, what: 'the gap annotation delivered after the outage', intervalMs: 500 });
    const ext = delivered.annotation!.external_id;
    const stored = emu.annotations().filter((a) => a.external_id === ext);
    expect(stored).toHaveLength(1);
    expect(stored[0].text).toBe('No data from Mixer 1 (Modbus, device mixer1): device not answering');
    expect(stored[0].machine_variables.map((v) => v.id)).toEqual(['mvr_mixer1_speed', 'mvr_mixer1_level']);
    expect(Date.parse(stored[0].started_at!)).toBe(closed.from);
    expect(Date.parse(stored[0].ended_at!)).toBe(closed.to);
    const metrics = await (await fetch(`${gw.handle.httpUrl}/metrics`)).text();
    expect(metrics).toMatch(/gateway_gaps_open 0/);
    expect(metrics).toMatch(/gateway_gap_seconds_total\{reason="device_error"\} ([5-9]|[1-9]\d)/);

    // A restart neither re-annotates the gap nor sends the annotation again.
    await gw.close();
    const again = await startTestGateway(emu, sections, { dir });
    cleanup.push(() => again.destroy());
    await waitFor(() => again.handle.status().annotations !== undefined, { what: 'annotations running again' });
    // An absence (no second annotation), watched for a while: there is no event to wait for.
    await holdsFor(() => emu.annotations().filter((a) => a.external_id === ext).length === 1, { forMs: 2_000, what: 'one annotation of the gap after the restart' });
    const gaps = await apiGaps(again);
    expect(gaps.filter((g) => g.reason === 'device_error')).toHaveLength(1);
    // the restart itself is a gateway_stopped gap of the source
    expect(gaps.some((g) => g.reason === 'gateway_stopped' && g.source === 'modbus')).toBe(true);

    // The CLI reads the same ledger through the API.
    const cli = await runCli(['gaps', 'list', '--url', again.handle.httpUrl!]);
    expect(cli.code).toBe(0);
    expect(cli.out).toMatch(/device_error\s+no\s+delivered /);
    expect(cli.out).toContain('mvr_mixer1_speed,mvr_mixer1_level');
  }, 150_000);

  it('records a full-buffer drop episode as buffer_full over the sample times it lost', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    emu.setFaults({ outage_seconds: 3_600 });
    const gw = await startTestGateway(emu, {
      http: { enabled: true, port: 0 },
      buffer: { max_bytes: 1_000_000, when_full: 'drop_oldest' },
      // 2,000 samples/s of variables the service knows (mvr_gen_1-20): fills 1 MB in seconds, and the
      // sync path drains faster than that once the service is back.
      generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: 20 }, interval: 10 }],
    });
    cleanup.push(() => gw.destroy());
    const startedAt = Date.now();
    const open = await waitFor(async () => (await apiGaps(gw, 'state=open')).find((g) => g.reason === 'buffer_full'), { timeoutMs: 60_000, what: 'an open buffer_full gap', intervalMs: 500 });
    expect(open.source).toBe('gen');
    expect(open.variables).toBeNull();
    // drop_oldest drops the oldest samples: the gap starts at the first samples the gateway read.
    expect(open.from).toBeGreaterThanOrEqual(startedAt - 2_000);
    const dropped = gw.handle.buffer.stats().fullEpisode!;
    expect(dropped.samplesLost).toBeGreaterThan(0);

    // The service is back: the buffer drains, drops stop, the episode ends (after its quiet time).
    emu.clearFaults();
    const closed = await waitFor(async () => (await apiGaps(gw)).find((g) => g.id === open.id && g.to !== null), { timeoutMs: 150_000, what: 'the buffer_full gap closed', intervalMs: 1_000 });
    expect(closed.to!).toBeGreaterThan(closed.from);
    expect(closed.to!).toBeLessThanOrEqual(Date.now());
    expect(closed.filled).toBe('no');
    expect(formatGaps([closed], 'all')).toMatch(/gen\s+all\s+\S+\s+\S+\s+\S+\s+buffer_full\s+no\s+-/);
  }, 240_000);
});
