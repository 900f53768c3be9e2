import mqtt from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import { churnSockets, openSockets } from '../../helpers/flood.js';
import { plcConnect } from '../../helpers/mqtt-wire.js';
import { startEmbeddedBroker, waitFor } from './helpers.js';

/**
 * One host cannot make the embedded broker deaf: limits per remote address, on the MQTT port and
 * the WebSocket port. The attacker is 127.0.0.2, the PLC 127.0.0.1 (both loopback on Linux).
 */

const ATTACKER = '127.0.0.2';
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

async function startBroker(broker: Record<string, unknown>) {
  const b = await startEmbeddedBroker(broker, cleanup);
  const detail = () => b.src.status().detail as { refused: Record<string, number>; unauthenticated: number };
  const refusedTotal = () => Object.values(detail().refused).reduce((a, n) => a + n, 0);
  return { ...b, detail, refusedTotal };
}

describe('embedded broker: limits per remote address', () => {
  it('(b2) 500 idle sockets a second from one address: a PLC that sends CONNECT 0.2 s after connecting gets 10 of 10 CONNACKs', async () => {
    // connect_deadline raised: on a busy machine the PLC's wait below can outlast the 5 s default.
    const b = await startBroker({ connect_deadline: '60s' });
    const t0 = performance.now();
    const churn = churnSockets(500, { port: b.address.port, from: ATTACKER });
    cleanup.push(async () => churn.stop());
    // The churn is under way: the broker is closing the attacker's sockets.
    await waitFor(() => b.refusedTotal() >= 200, { timeoutMs: 60_000, what: 'the churn under way' });

    const codes: Array<number | 'closed' | 'timeout'> = [];
    const closedMeanwhile: number[] = [];
    for (let i = 0; i < 10; i++) {
      let sinceConnect = 0;
      const started = performance.now();
      codes.push(
        await plcConnect({
          port: b.address.port,
          clientId: `plc-${i}`,
          username: 'plc',
          password: 'right-pass-1',
          // The PLC waits 0.2 s, and at least until the broker has closed 100 more connections
          // since it accepted the PLC's: more than max_unauthenticated (64), so on a busy machine
          // too the PLC's socket would be the oldest unauthenticated one overall before it speaks.
          // A second PLC connecting after it tells when the broker has accepted the first (the
          // accept queue is first in, first out), whatever the broker's lag behind the churn.
          before: async (gone) => {
            await plcConnect({ port: b.address.port, clientId: `probe-${i}`, username: 'plc', password: 'right-pass-1' });
            const base = b.refusedTotal();
            await waitFor(() => gone() || (performance.now() - started >= 200 && (sinceConnect = b.refusedTotal() - base) >= 100), { timeoutMs: 60_000, intervalMs: 10, what: 'the churn closing 100 connections' });
          },
        }),
      );
      closedMeanwhile.push(sinceConnect);
    }
    churn.stop();
    expect(codes).toEqual(Array(10).fill(0));
    expect(Math.min(...closedMeanwhile)).toBeGreaterThanOrEqual(100);

    // The attacker paid: its own oldest sockets were closed, counted and logged with its address.
    const refused = b.detail().refused;
    expect(refused.address_unauthenticated_limit).toBeGreaterThanOrEqual(1_000);
    expect(refused.unauthenticated_limit ?? 0).toBe(0);
    const metric = (await b.metrics.brokerConnectionsRefused.get()).values.find((v) => v.labels.reason === 'address_unauthenticated_limit')?.value;
    expect(metric).toBe(refused.address_unauthenticated_limit);
    const lines = b.log.lines.filter((l) => String(l.msg).includes(`closed the oldest connection from ${ATTACKER}`));
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines[0]).toMatchObject({ remote: ATTACKER, reason: 'address_unauthenticated_limit' });
    // At a bounded rate: a line a minute, not one per socket (the summary comes at the end of the minute).
    expect(lines.length).toBeLessThanOrEqual(1 + Math.ceil((performance.now() - t0) / 60_000));
  }, 300_000);

  it('counts WebSocket sockets from their TCP accept: 200 idle ones from one address hold max_unauthenticated_per_address, a PLC over WebSocket gets in, a half-sent upgrade ends at connect_deadline', async () => {
    const b = await startBroker({ websocket: { port: 0 }, connect_deadline: '2s' });
    const ws = b.address.websocket!;
    const idle = await openSockets(200, { port: ws.port, from: ATTACKER });
    cleanup.push(async () => idle.stop());
    expect(idle.connected).toBe(200);
    await waitFor(() => idle.open <= 16, { timeoutMs: 30_000, what: `the attacker held to 16 sockets (open: ${idle.open})` });
    expect(b.detail().refused.address_unauthenticated_limit).toBeGreaterThanOrEqual(184);

    const plc = await mqtt.connectAsync(`ws://127.0.0.1:${ws.port}${ws.path}`, { username: 'plc', password: 'right-pass-1', reconnectPeriod: 0, connectTimeout: 10_000 });
    cleanup.push(() => plc.endAsync(true));
    await plc.publishAsync('plant/ws', '1', { qos: 1 });
    expect(plc.connected).toBe(true);

    // The attacker's remaining sockets never upgraded: closed at connect_deadline, with its address.
    const half = await openSockets(1, { port: ws.port, from: '127.0.0.3', first: `GET ${ws.path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n` });
    cleanup.push(async () => half.stop());
    await waitFor(() => idle.open === 0 && half.open === 0, { timeoutMs: 20_000, what: 'idle and half-sent sockets closed at connect_deadline' });
    expect(b.detail().refused.connect_deadline).toBeGreaterThanOrEqual(17);
    expect(b.log.lines.some((l) => l.reason === 'connect_deadline' && l.remote === '127.0.0.3')).toBe(true);
    expect(plc.connected).toBe(true);
  }, 120_000);
});
