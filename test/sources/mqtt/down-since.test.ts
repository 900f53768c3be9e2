import { afterEach, describe, expect, it } from 'vitest';
import type { Source } from '../../../src/core/source.js';
import { createMqttSources } from '../../../src/sources/mqtt/index.js';
import { openTestBuffer } from '../../helpers/buffer.js';
import { contexts, section, startAedes, waitFor, type TestAedes } from './helpers.js';

/**
 * Issue 24 §1: "down since" reset at every retry (each attempt changed the state and its `since`),
 * and an old error stayed after recovery. A source's status now has `downSince`, fixed from the
 * moment it stopped being connected until it is connected again, and `lastError` (with its time)
 * is cleared on recovery. Against a real aedes broker that goes away and comes back.
 */
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

describe('source status across an outage (issue 24 §1)', () => {
  it('downSince stays put across retries; the error carries its time and clears on recovery', async () => {
    let b: TestAedes = await startAedes();
    const port = b.port;
    cleanup.push(() => b.close());
    const tb = openTestBuffer();
    cleanup.push(async () => tb.destroy());
    const ctxs = contexts(tb.buffer);
    const [source] = createMqttSources(section({ connections: [{ name: 'line', url: b.url, client_id: 'gw-down-since', reconnect: { initial: 100, max: 300 }, subscriptions: [{ topic: 'x', format: 'number', variable: 'mvr_x' }] }] }), ctxs.makeContext) as Source[];
    await source.start();
    cleanup.push(() => source.close());
    await waitFor(() => source.status().state === 'connected');
    expect(source.status().downSince).toBeNull();

    const wentDown = Date.now();
    await b.close();
    const down = await waitFor(() => source.status().downSince ?? null, { what: 'downSince set' });
    expect(down).toBeGreaterThanOrEqual(wentDown - 1);
    // Several attempts, each moving `since`; downSince does not move.
    const sinces = new Set<number>();
    const reconnects = async () => (await ctxs.metrics.sourceReconnects.get()).values.reduce((n, v) => n + v.value, 0);
    const r0 = await reconnects();
    await waitFor(
      async () => {
        const st = source.status();
        sinces.add(st.since);
        expect(st.downSince).toBe(down);
        return (await reconnects()) >= r0 + 3 && sinces.size >= 2;
      },
      { what: 'three retries while the broker is away', intervalMs: 10, timeoutMs: 20_000 },
    );
    const err = source.status().lastError;
    expect(err?.code).toBe('MQTT_UNREACHABLE');
    expect(err?.at).toBeGreaterThanOrEqual(wentDown - 1);

    b = await startAedes(port);
    await waitFor(() => source.status().state === 'connected', { what: 'reconnected', timeoutMs: 20_000 });
    expect(source.status().downSince).toBeNull();
    expect(source.status().lastError).toBeNull();
  }, 60_000);
});
