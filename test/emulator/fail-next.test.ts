import { afterEach, describe, expect, it } from 'vitest';
import { parseFaultFlags, runEmulatorCli, type EmulatorHandle } from '../../src/emulator/index.js';
import { call, client, DEMO_API_KEY, item, withEmulator } from './helpers.js';

/** "Fail the next N requests" per path, and faults given as --fault flags. */
let em: EmulatorHandle | undefined;
afterEach(async () => {
  await em?.close();
  em = undefined;
});

const batch = (i: number) => [item('mvr_gen_1', `2026-01-01T00:00:${String(i).padStart(2, '0')}.000Z`, i)];

describe('fail_next', () => {
  it('fails exactly the next N requests of its path with its status, then serves again; other paths unaffected', async () => {
    em = await withEmulator();
    const c = client(em, DEMO_API_KEY);
    const set = await call(`${em.inspectUrl}/faults`, { method: 'POST', json: { fail_next: { count: 2, status: 503, path: '/machine-data/batch' } } });
    expect(set.status).toBe(200);
    expect(set.body.fail_next).toEqual([{ count: 2, path: '/machine-data/batch', status: 503 }]);

    expect((await c.get('/machines')).status).toBe(200);
    const first = await c.batch(batch(1));
    expect(first.status).toBe(503);
    expect(first.body).toEqual({ code: 'service_unavailable', message: 'injected fault (fail_next)' });
    expect(em.faults().fail_next).toEqual([{ count: 1, path: '/machine-data/batch', status: 503 }]);
    expect((await c.batch(batch(2))).status).toBe(503);
    expect(em.faults().fail_next).toEqual([]);
    expect((await c.batch(batch(3))).status).toBe(200);
    // Nothing of the failed requests was stored.
    expect(em.values('mvr_gen_1').map((v) => v.value)).toEqual([3]);
  });

  it('a counter without a path takes any request; "drop" destroys the socket; status defaults to the status setting; count 0 removes', async () => {
    em = await withEmulator();
    const c = client(em, DEMO_API_KEY);
    em.setFaults({ status: 502, fail_next: [{ count: 1 }, { count: 1, path: '/machines', status: 'drop' }, { count: 5, path: '/machine-variables' }] });
    expect(em.faults().fail_next).toEqual([
      { count: 1, path: null, status: 502 },
      { count: 1, path: '/machines', status: 'drop' },
      { count: 5, path: '/machine-variables', status: 502 },
    ]);
    // A path's own counter goes before the any-path one.
    await expect(c.get('/machines')).rejects.toThrow();
    expect((await c.batch(batch(1))).status).toBe(502);
    expect((await c.batch(batch(2))).status).toBe(200);
    em.setFaults({ fail_next: { count: 0, path: '/machine-variables' } });
    expect((await c.get('/machine-variables')).status).toBe(200);
    expect(em.faults().fail_next).toEqual([]);
  });

  it('429 as the status uses the rate-limit envelope; DELETE /_emulator/faults clears the counters', async () => {
    em = await withEmulator();
    const c = client(em, DEMO_API_KEY);
    em.setFaults({ fail_next: { count: 3, status: 429 } });
    const r = await c.get('/machines');
    expect(r.status).toBe(429);
    expect(r.body.error).toMatchObject({ type: 'rate_limit', code: 'rate_limit_exceeded' });
    expect(r.headers['retry-after']).toBe('1');
    await call(`${em.inspectUrl}/faults`, { method: 'DELETE' });
    expect((await c.get('/machines')).status).toBe(200);
  });

  it('refuses bad settings naming the field', async () => {
    em = await withEmulator();
    for (const [body, field] of [
      [{ fail_next: { count: -1 } }, 'fail_next.count'],
      [{ fail_next: { count: 1, status: 200 } }, 'fail_next.status'],
      [{ fail_next: { count: 1, path: 'machines' } }, 'fail_next.path'],
      [{ fail_next: [{ count: 1, when: 'now' }] }, 'fail_next[0]'],
    ] as const) {
      const r = await call(`${em.inspectUrl}/faults`, { method: 'POST', json: body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.message).toContain(field);
    }
  });
});

describe('--fault flags', () => {
  it('parse into the same setting as POST /_emulator/faults', () => {
    expect(parseFaultFlags(['error_rate=0.2', 'status=503', 'paths=/machine-data/batch,/oauth2/token', 'fail_next=3:504@/machine-data/batch', 'fail_next=1:drop', 'latency_ms=15'])).toEqual({
      error_rate: 0.2,
      status: 503,
      latency_ms: 15,
      paths: ['/machine-data/batch', '/oauth2/token'],
      fail_next: [{ count: 3, status: 504, path: '/machine-data/batch' }, { count: 1, status: 'drop' }],
    });
  });

  it.each([
    [['error_rate=lots'], '--fault error_rate=lots: "lots" is not a number'],
    [['error_rate=2'], 'error_rate'],
    [['eror_rate=0.1'], '--fault eror_rate: unknown fault (known: error_rate'],
    [['error_rate'], '--fault error_rate: expected NAME=VALUE'],
    [['fail_next=three'], '--fault fail_next=three: expected COUNT[:STATUS|:drop][@PATH]'],
    [['fail_next=1:200'], 'fail_next'],
  ])('%j -> exit 2 naming the flag and value', async (argv, message) => {
    const err: string[] = [];
    const code = await runEmulatorCli(['--port', '0', ...argv.flatMap((a) => ['--fault', a])], { stdout: () => undefined, stderr: (s) => err.push(s), handleSignals: false });
    expect(code).toBe(2);
    expect(err.join('\n')).toContain(message);
  });

  it('a started emulator applies them from the first request', async () => {
    const out: string[] = [];
    const ac = new AbortController();
    let ready!: () => void;
    const started = new Promise<void>((r) => (ready = r));
    const exit = runEmulatorCli(['--port', '0', '--fault', 'fail_next=2:503@/machines', '--fault', 'latency_ms=1'], {
      stdout: (line) => {
        out.push(line);
        if (line.startsWith('Press Ctrl-C')) ready();
      },
      stderr: () => undefined,
      signal: ac.signal,
      handleSignals: false,
    });
    await started;
    const baseUrl = /base URL:\s+(\S+)/.exec(out.join('\n'))![1];
    expect(out.join('\n')).toContain('Faults set:');
    const get = () => call(`${baseUrl}/machines`, { headers: { authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_demo' } });
    expect((await get()).status).toBe(503);
    expect((await get()).status).toBe(503);
    expect((await get()).status).toBe(200);
    ac.abort();
    expect(await exit).toBe(0);
  });
});
