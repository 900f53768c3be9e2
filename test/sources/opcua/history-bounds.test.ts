import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { formatGaps } from '../../../src/commands/gaps.js';
import { startEmulator } from '../../../src/emulator/index.js';
import { startOpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { MAX_STALLED_PAGES } from '../../../src/sources/opcua/history.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { delay, holdsFor, waitFor } from '../../helpers/wait.js';
import { apiGaps } from '../../helpers/gaps.js';
import { captureLogger, tmpPki } from './helpers.js';
import { startSimulatorProcess } from './skewed-simulator.js';

/**
 * Issue 21 §2: the historical backfill against real node-opcua servers that break the rules of
 * HistoryRead (src/sim/opcua-misbehaving.ts), next to a node that behaves (Press1 Temperature):
 * a server that always answers the same values with a continuation point, and one that answers
 * 1,000,000 values at once, ignoring numValuesPerNode. The gateway is stopped for 4 s while the
 * server keeps producing, then started again: the gap must be read back within bounds, recorded as
 * not completely filled with the reason, and said once in the log.
 */

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

function section(endpoint: string, nodes: Array<{ node_id: string; variable: string }>, extra: Record<string, unknown> = {}) {
  return { servers: [{ name: 'plc', endpoint, publishing_interval: 200, reconnect: { initial_delay: 200, max_delay: 1_000 }, nodes, ...extra }] };
}

/** Runs a gateway until live values flow, stops it for `gapMs`, starts it again; returns the second one and the gap's edges. */
async function gapAndRestart(emu: Awaited<ReturnType<typeof startEmulator>>, sections: Record<string, unknown>, live: string, gapMs: number) {
  const dir = mkdtempSync(join(tmpdir(), 'gw-hist-bounds-'));
  const first = await startTestGateway(emu, sections, { dir });
  cleanup.push(() => first.close());
  await waitFor(() => emu.values(live).length >= 5, { timeoutMs: 30_000, what: `live ${live} values upstream` });
  await first.close();
  const stoppedAt = Date.now();
  await delay(gapMs);
  const log = captureLogger('info');
  const restartedAt = Date.now();
  const second: TestGateway = await startTestGateway(emu, sections, { dir, logger: log.logger });
  cleanup.push(() => second.destroy());
  return { second, log, stoppedAt, restartedAt };
}

const settledGap = (gw: TestGateway, log: ReturnType<typeof captureLogger>, timeoutMs = 60_000) =>
  waitFor(async () => (await apiGaps(gw)).find((g) => g.reason === 'gateway_stopped' && g.to !== null && g.filled !== 'pending'), { timeoutMs, what: 'the gateway_stopped gap settled by the backfill', intervalMs: 500 }).catch((e: Error) => {
    throw new Error(`${e.message}\ngateway warnings:\n${log.lines.filter((l) => (l.level as number) >= 40).map((l) => l.msg).join('\n')}`);
  });

describe('OPC UA historical backfill against a misbehaving server (issue 21 §2)', () => {
  it('a server that answers the same values with a continuation point for ever: reading stops, the continuation point is released, the gap is recorded partial with the reason and logged once', async () => {
    const sim = await startOpcuaSimulator({ pkiDir: tmpPki('hist-loop-sim-'), updateIntervalMs: 200, misbehave: { loopingHistory: true } });
    cleanup.push(() => sim.close());
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const looping = sim.misbehaviour!.nodeIds.loopingHistory!;
    const sections = { opcua: section(sim.endpointUrl, [{ node_id: sim.nodeIds.temperature, variable: 'mvr_press1_temperature' }, { node_id: looping, variable: 'mvr_press1_pressure' }]), http: { enabled: true, port: 0 } };

    const { second, log, stoppedAt, restartedAt } = await gapAndRestart(emu, sections, 'mvr_press1_pressure', 4_000);
    const gap = await settledGap(second, log);
    expect(gap.filled).toBe('partial');
    // The reason is in the gap: GET /api/gaps (and the console's Gaps page), and `edge-gateway gaps list`.
    expect(formatGaps([gap], 'all')).toMatch(/gateway_stopped\s+partial\s+-\s+the server's HistoryRead pages stopped moving forward in time/);
    expect(gap.note).toMatch(/the server's HistoryRead pages stopped moving forward in time for 1 node\(s\) \(the same values again with a continuation point\); reading stopped after 4 page\(s\): mvr_press1_pressure/);

    // The first page is taken, then MAX_STALLED_PAGES pages that bring nothing newer, then the
    // continuation point is released. Before: about 18 requests a second until the gateway stopped.
    const { counters } = sim.misbehaviour!;
    expect(counters.historyReads).toBe(1 + MAX_STALLED_PAGES);
    expect(counters.historyReleases).toBe(1);
    await holdsFor(() => counters.historyReads === 1 + MAX_STALLED_PAGES, { forMs: 3_000, what: 'no further HistoryRead of the looping node' });

    // The healthy node of the same gap is filled from its history; the looping one's first page once.
    const inGap = (variable: string) => emu.values(variable).filter((v) => Date.parse(v.timestamp) > stoppedAt && Date.parse(v.timestamp) < restartedAt);
    await waitFor(() => inGap('mvr_press1_temperature').length >= 10, { timeoutMs: 30_000, what: 'temperature values of the gap upstream' });
    const metrics = await (await fetch(`${second.handle.httpUrl}/metrics`)).text();
    const historyValues = Number(/gateway_opcua_history_values_total\{source="plc"\} (\d+)/.exec(metrics)?.[1]);
    expect(historyValues).toBeLessThan(200); // 100 of the looping node + about 20 of the temperature

    const lines = log.lines.filter((l) => l.code === 'OPCUA_HISTORY_INCOMPLETE');
    expect(lines).toHaveLength(1);
    expect(lines[0].msg).toContain('could not be filled completely from the server\'s history (partial)');
    expect(lines[0].gap_id).toBe(gap.id);
  }, 150_000);

  it('a server that answers 1,000,000 values at once: the gateway announces max_message_size, the server refuses to send it, memory and event loop stay calm, no false gap; the gap is recorded partial with the reason', async () => {
    // In a child process: building 1,000,000 values takes the server seconds and hundreds of MB,
    // which must not be counted against the gateway under test (this process).
    const sim = await startSimulatorProcess({ pkiDir: tmpPki('hist-huge-sim-'), updateIntervalMs: 200, misbehave: { hugeHistory: 1_000_000, printEvents: true } });
    cleanup.push(() => sim.close());
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const huge = sim.misbehavingNodeIds.hugeHistory!;
    // The server itself stalls for a second or two while it collects its 1,000,000 values after
    // failing to send them: the watchdog waits 10 s, so only the gateway's own stalls could trip it.
    // Building them takes the server 5-20 s on a busy machine: requests may take a minute.
    const sections = { opcua: section(sim.endpointUrl, [{ node_id: sim.nodeIds.temperature, variable: 'mvr_press1_temperature' }, { node_id: huge, variable: 'mvr_press1_pressure' }], { watchdog_multiplier: 50, request_timeout: '60s' }), http: { enabled: true, port: 0 } };

    const loop = monitorEventLoopDelay({ resolution: 10 });
    let baseRss = 0;
    let peakRss = 0;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 50);
    cleanup.push(async () => clearInterval(sampler));
    const { second, log, stoppedAt, restartedAt } = await gapAndRestart(emu, sections, 'mvr_press1_pressure', 4_000);
    baseRss = process.memoryUsage().rss;
    peakRss = baseRss;
    loop.enable();
    const gap = await settledGap(second, log, 150_000);
    loop.disable();
    clearInterval(sampler);

    const longestBlockMs = loop.max / 1e6;
    const grewMb = (peakRss - baseRss) / 1e6;
    // Before: about 430 MB more and a block of seconds (the watchdog dropped the session).
    expect(longestBlockMs, `longest event-loop block ${longestBlockMs.toFixed(0)} ms`).toBeLessThan(1_000);
    expect(grewMb, `RSS grew ${grewMb.toFixed(0)} MB`).toBeLessThan(150);
    const detail = second.handle.sources[0].status().detail as { recoveries: Record<string, number> };
    expect(detail.recoveries.watchdog ?? 0).toBe(0);
    expect(gap.filled).toBe('partial');
    expect(gap.note).toContain("the server's HistoryRead answer for 1 node(s) exceeded max_message_size even for one node, so it ignores numValuesPerNode (history.values_per_request 1000): mvr_press1_pressure");
    // The server was asked for 1,000 values, built 1,000,000 and could not send them (4 MiB).
    const asked = sim.events().filter((e) => e.kind === 'history_read' && e.node === 'huge' && !e.release);
    expect(asked.length).toBeGreaterThanOrEqual(1);
    expect(asked.length).toBeLessThanOrEqual(2); // with the temperature node, then alone
    for (const e of asked) expect(e).toMatchObject({ numValuesPerNode: 1_000, values: 1_000_000 });

    // No false gap: nothing else than the stop.
    expect((await apiGaps(second)).filter((g) => g.reason !== 'gateway_stopped')).toEqual([]);

    // The healthy node of the same gap is filled.
    const inGap = () => emu.values('mvr_press1_temperature').filter((v) => Date.parse(v.timestamp) > stoppedAt && Date.parse(v.timestamp) < restartedAt);
    await waitFor(() => inGap().length >= 10, { timeoutMs: 30_000, what: 'temperature values of the gap upstream' });
  }, 240_000);
});
