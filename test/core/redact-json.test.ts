import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.js';
import { registerSecret } from '../../src/core/redact.js';

/**
 * Issue 21 §3: a secret that looks like JSON structure ("msg":") or like a number used to be
 * replaced in the raw log line and broke the line's JSON; many secrets made every line slow.
 */
describe('log line redaction', () => {
  it('redacts secrets inside strings only, so every line stays JSON', () => {
    const lines: string[] = [];
    const destination = new Writable({ write: (c, _e, cb) => { lines.push(String(c)); cb(); } });
    const log = createLogger({ format: 'json', destination });
    for (const s of ['"msg":"', '","level":', '4242', 'back\\slash']) registerSecret(s);
    log.info({ count: 4242, detail: 'peer said "msg":" and 4242 and back\\slash' }, 'line with "msg":"');
    log.info({ nested: { v: '","level":' } }, 'plain');
    expect(lines).toHaveLength(2);
    const first = JSON.parse(lines[0]) as Record<string, unknown>;
    expect(first).toMatchObject({ count: 4242, detail: 'peer said [redacted] and [redacted] and [redacted]', msg: 'line with [redacted]' });
    expect(JSON.parse(lines[1])).toMatchObject({ nested: { v: '[redacted]' }, msg: 'plain' });
  });

  it('stays quick with thousands of secrets registered', () => {
    for (let i = 0; i < 10_000; i++) registerSecret(`many-secrets-${i}-value`);
    const lines: string[] = [];
    const destination = new Writable({ write: (c, _e, cb) => { lines.push(String(c)); cb(); } });
    const log = createLogger({ format: 'json', destination });
    const started = performance.now();
    for (let i = 0; i < 2_000; i++) log.info({ source: 'press-1', value: i, detail: 'an ordinary line of about two hundred characters, as the gateway writes them every few seconds' }, 'status');
    const ms = performance.now() - started;
    log.info({ detail: 'echo many-secrets-9999-value' }, 'echo');
    expect((JSON.parse(lines.at(-1)!) as { detail: string }).detail).toBe('echo [redacted]');
    // Generous for a busy machine: the one-pass search takes a few µs a line, the needle loop ms.
    expect(ms).toBeLessThan(2_000);
  });
});
