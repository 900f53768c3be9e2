import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Source, SourceKind } from '../../../src/core/source.js';
import { createMqttSources } from '../../../src/sources/mqtt/index.js';
import { openTestBuffer } from '../../helpers/buffer.js';
import { captureLogger, connectClient, contexts, endClient, mosquittoAvailable, section, startMosquitto, waitFor } from './helpers.js';

/**
 * Issue 12 §8: with mosquitto's queue limit (max_queued_messages, 1000 by default) a gateway
 * restart under load loses messages in the broker, visible only in mosquitto's own log. The
 * gateway reads mosquitto's $SYS drop count and warns at start-up when it grew while it was away.
 */

const HAVE_MOSQUITTO = mosquittoAvailable();
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

describe.skipIf(!HAVE_MOSQUITTO)('mosquitto dropping queued messages while the gateway is away', () => {
  it('warns after the restart, with the number dropped', async () => {
    const mq = await startMosquitto({ extra: ['max_queued_messages 10', 'sys_interval 1'] });
    cleanup.push(() => mq.stop());
    const tb = openTestBuffer();
    cleanup.push(() => tb.destroy());
    const dataDir = mkdtempSync(join(tmpdir(), 'gw-mq-drops-'));
    const conn = { name: 'plant', url: mq.url, client_id: 'gw-drops', clean: false, subscriptions: [{ topic: 'line/rate', format: 'number', qos: 1, variable: 'mvr_line_rate' }] };

    const run = async () => {
      const log = captureLogger();
      const ctxs = contexts(tb.buffer, log.logger);
      const make = (name: string, kind: SourceKind) => ({ ...ctxs.makeContext(name, kind), dataDir });
      const sources: Source[] = createMqttSources(section({ connections: [conn] }), make);
      for (const s of sources) await s.start();
      await waitFor(() => sources[0].status().state === 'connected', { what: 'connected' });
      return { sources, log };
    };

    // First run: connected, sees the broker's drop count (0), then stops (a gateway restart).
    const first = await run();
    await waitFor(() => first.log.lines.some((l) => l.msg === 'MQTT connected'), { what: 'first connect' });
    // At least one $SYS value seen: the source keeps the last one in its data folder.
    await waitFor(() => existsSync(join(dataDir, 'broker-dropped.txt')), { what: 'a $SYS dropped count seen' });
    await Promise.all(first.sources.map((s) => s.close()));

    // While it is away, 50 QoS 1 messages arrive for its session; mosquitto keeps 10.
    const plc = await connectClient(mq.url);
    for (let i = 0; i < 50; i++) await plc.publishAsync('line/rate', String(i), { qos: 1 });
    await endClient(plc);
    await waitFor(() => /Outgoing messages are being dropped for client gw-drops/.test(mq.log()), { what: 'mosquitto dropping' });

    const second = await run();
    cleanup.push(() => Promise.all(second.sources.map((s) => s.close())));
    const warning = await waitFor(() => second.log.lines.find((l) => typeof l.broker_dropped === 'number' && l.level === 40), { timeoutMs: 30_000, what: 'drop warning' });
    expect(warning.broker_dropped).toBe(40);
    expect(String(warning.msg)).toMatch(/dropped 40 messages while this gateway was disconnected.*max_queued_messages/);
    await waitFor(() => tb.rows().filter((r) => r.variable === 'mvr_line_rate').length === 10, { what: 'the 10 queued messages' });
    expect((second.sources[0].status().detail as Record<string, unknown>).broker_dropped_while_away).toBe(40);
  }, 90_000);
});
