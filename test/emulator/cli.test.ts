import { createServer } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EMULATOR_USAGE, runEmulatorCli } from '../../src/emulator/index.js';
import { call, getToken } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'emulator-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI to completion; a run that starts is stopped as soon as it is ready. */
async function run(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const ac = new AbortController();
  const code = await runEmulatorCli(argv, {
    stdout: (s) => {
      out.push(s);
      if (s.startsWith('Press Ctrl-C')) ac.abort();
    },
    stderr: (s) => err.push(s),
    signal: ac.signal,
    handleSignals: false,
  });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('edge-gateway emulator (runEmulatorCli)', () => {
  it.each([
    [['--port', 'abc'], '--port: "abc" is not a port number (0 to 65535)'],
    [['--port', '70000'], '--port: 70000 is not a port number (0 to 65535)'],
    [['--port', '-1'], '--port: a value is required (to give a value starting with "-", write --port=VALUE)'],
    [['--port=-1'], '--port: "-1" is not a port number (0 to 65535)'],
    [['--port'], '--port: a value is required'],
    [['--token-ttl', '0'], '--token-ttl: 0 is not a number of seconds (1 or more)'],
    [['--token-ttl', '1.5'], '--token-ttl: "1.5" is not a number of seconds (1 or more)'],
    [['--rate-limit', 'many'], '--rate-limit: "many" is not a number of requests per minute (0 disables the limit)'],
    [['--job-delay', '-5'], '--job-delay: a value is required'],
    [['--job-delay', '1s'], '--job-delay: "1s" is not a number of milliseconds (0 or more)'],
    [['--prot', '8080'], 'unknown flag --prot'],
    [['serve'], 'unexpected argument "serve"'],
    [['--host', ''], '--host: must not be empty'],
    [['--log-level', 'loud'], '--log-level: "loud" is not one of trace, debug, info, warn, error, fatal, silent'],
    [['--cors', 'localhost:5173'], '--cors: "localhost:5173" is not an origin (scheme://host[:port], no path) or *'],
    [['--cors', 'http://app.test/path'], '--cors: "http://app.test/path" is not an origin'],
    [['--journal-size', '-1'], '--journal-size: a value is required'],
    [['--journal-size', 'many'], '--journal-size: "many" is not a number of requests (0 to 100000)'],
    [['--fault', 'latency_ms=-5'], '--fault: latency_ms'],
    [['--max-connections', '4'], '--max-connections: 4 is not a number of connections (8 to 1000000)'],
    [['--max-connections-per-client', 'lots'], '--max-connections-per-client: "lots" is not a number of connections (1 to 1000000)'],
  ])('%j -> exit 2 naming the flag and value', async (argv, message) => {
    const r = await run(argv);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`edge-gateway emulator: ${message}`);
    expect(r.err).toContain('--help');
    expect(r.out).toBe('');
  });

  it('--help prints the usage and exits 0', async () => {
    const r = await run(['--help']);
    expect(r.code).toBe(0);
    expect(r.out).toBe(EMULATOR_USAGE);
    for (const flag of ['--port', '--host', '--fixture', '--token-ttl', '--rate-limit', '--job-delay', '--fault', '--cors', '--journal-size', '--max-connections', '--max-connections-per-client', '--log-level']) expect(r.out).toContain(flag);
    expect((await run(['-h'])).out).toBe(EMULATOR_USAGE);
  });

  it('a bad fixture exits 2 with the problem; a busy port exits 1', async () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'organisations: []\n');
    const r = await run(['--port', '0', '--fixture', bad]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/bad\.yaml: organisations: needs at least 1 entry/);
    const blocker = createServer();
    await new Promise<void>((res) => blocker.listen(0, '127.0.0.1', res));
    const port = (blocker.address() as { port: number }).port;
    try {
      const busy = await run(['--port', String(port)]);
      expect(busy.code).toBe(1);
      expect(busy.err).toMatch(/EADDRINUSE/);
    } finally {
      blocker.close();
    }
  });

  it('starts, prints the URLs and demo credentials, serves, and stops cleanly', async () => {
    const out: string[] = [];
    const ac = new AbortController();
    let ready!: () => void;
    const started = new Promise<void>((res) => (ready = res));
    const sigint = process.listenerCount('SIGINT');
    const exit = runEmulatorCli(['--port', '0', '--rate-limit', '100', '--token-ttl', '30', '--job-delay', '0'], {
      stdout: (line) => {
        out.push(line);
        if (line.startsWith('Press Ctrl-C')) ready();
      },
      stderr: (line) => out.push(line),
      signal: ac.signal,
    });
    await started;
    const text = out.join('\n');
    const baseUrl = /base URL:\s+(\S+)/.exec(text)![1];
    const tokenUrl = /token URL:\s+(\S+)/.exec(text)![1];
    const authUrl = /auth URL:\s+(\S+)/.exec(text)![1];
    expect(baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/tracking\/v1$/);
    expect(tokenUrl).toBe(`${authUrl}/oauth2/token`);
    expect(text).toContain('organisation (Service-Organisation-Id): org_demo');
    expect(text).toContain('client_id: demo-gateway');
    expect(text).toContain('client_secret: demo-secret');
    expect(text).toContain('API key:   demo-api-key');
    // While running it listens for SIGINT/SIGTERM.
    expect(process.listenerCount('SIGINT')).toBe(sigint + 1);

    const token = await getToken({ tokenUrl } as never);
    const machines = await call(`${baseUrl}/machines`, { headers: { authorization: `Bearer ${token}`, 'service-organisation-id': 'org_demo' } });
    expect(machines.status).toBe(200);
    expect(machines.body.data.length).toBeGreaterThan(0);
    const token2 = await call(tokenUrl, { method: 'POST', headers: { authorization: `Basic ${Buffer.from('demo-gateway:demo-secret').toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=client_credentials&audience=com.service.tracking' });
    expect(token2.body.expires_in).toBe(30);

    ac.abort();
    expect(await exit).toBe(0);
    expect(out[out.length - 1]).toBe('Tracking-service emulator stopped');
    expect(process.listenerCount('SIGINT')).toBe(sigint);
    await expect(call(`${baseUrl}/machines`)).rejects.toThrow();
  });

  it('does not print demo credentials with a fixture file', async () => {
    const f = join(dir, 'f.json');
    writeFileSync(f, JSON.stringify({ organisations: [{ id: 'org_f', name: 'F' }] }));
    const out: string[] = [];
    const ac = new AbortController();
    const exit = runEmulatorCli(['--port', '0', '--fixture', f], {
      stdout: (line) => {
        out.push(line);
        if (line.startsWith('Press Ctrl-C')) ac.abort();
      },
      signal: ac.signal,
      handleSignals: false,
    });
    expect(await exit).toBe(0);
    expect(out.join('\n')).not.toContain('demo-secret');
  });
});
