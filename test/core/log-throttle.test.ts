import { afterEach, describe, expect, it } from 'vitest';
import { LogThrottle } from '../../src/core/log-throttle.js';
import { createMqttSources } from '../../src/sources/mqtt/index.js';
import { openTestBuffer } from '../helpers/buffer.js';
import { captureLogger, connectClient, contexts, endClient, section, waitFor } from '../sources/mqtt/helpers.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

describe('LogThrottle: a ceiling per reason (issue 12 §1)', () => {
  it('writes at most 10 lines per reason per interval, then one summary with the count', async () => {
    const log = captureLogger();
    const throttle = new LogThrottle(log.logger, 300);
    for (let i = 0; i < 20_000; i++) throttle.warn(`unmatched|topic/${i}`, { topic: `topic/${i}` }, 'bad topic');
    throttle.warn('other|x', {}, 'another reason');
    expect(log.lines.filter((l) => l.msg === 'bad topic')).toHaveLength(10);
    expect(log.lines.filter((l) => l.msg === 'another reason')).toHaveLength(1);
    const summary = await waitFor(() => log.lines.find((l) => String(l.msg).startsWith('bad topic (and')), { timeoutMs: 10_000, what: 'summary line' });
    expect(summary.msg).toMatch(/^bad topic \(and 19990 more in the last /);
    expect(summary.more).toBe(19_990);
    // A new interval starts afresh.
    throttle.warn('unmatched|topic/new', {}, 'bad topic');
    expect(log.lines.filter((l) => l.msg === 'bad topic')).toHaveLength(11);
  });

  it('a broker publishing 2,000 distinct bad topics writes a handful of lines, not 2,000', async () => {
    const tb = openTestBuffer();
    cleanup.push(() => tb.destroy());
    const log = captureLogger();
    const ctxs = contexts(tb.buffer, log.logger);
    const sources = createMqttSources(
      section({ broker: { enabled: true, host: '127.0.0.1', port: 0, allow_anonymous: true }, connections: [{ name: 'in', url: 'embedded', subscriptions: [{ topic: 'bad/#', format: 'number', variable: 'mvr_bad' }] }] }),
      ctxs.makeContext,
    );
    for (const s of sources) await s.start();
    cleanup.push(() => Promise.all(sources.map((s) => s.close())));
    const broker = (sources[0] as unknown as { broker: { address: { port: number } | null } }).broker;
    await waitFor(() => broker.address, { what: 'broker listening' });
    const pub = await connectClient(`mqtt://127.0.0.1:${broker.address!.port}`);
    cleanup.push(() => endClient(pub));
    for (let i = 0; i < 2_000; i++) await pub.publishAsync(`bad/${i}`, 'not a number', { qos: 1 });
    const refusedLines = log.lines.filter((l) => l.source === 'in' && typeof l.topic === 'string' && String(l.topic).startsWith('bad/'));
    expect(refusedLines.length).toBeGreaterThan(0);
    expect(refusedLines.length).toBeLessThanOrEqual(10);
  });
});
