import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, DEMO_API_KEY } from './helpers.js';

const CLI = join(import.meta.dirname, '..', '..', 'dist', 'cli.js');

/**
 * `node dist/cli.js emulator`, the fastest way to run it from a checkout (README): the human
 * start-up text alone on stdout, JSON log lines on stderr, one per request with --log-level debug.
 */
describe('node dist/cli.js emulator (a real process)', () => {
  it('prints the start-up text on stdout and JSON log lines on stderr; stops on SIGTERM with exit 0', async () => {
    const child = spawn(process.execPath, [CLI, 'emulator', '--port', '0', '--log-level', 'debug'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no start-up text within 30 s:\n${out}\n${err}`)), 30_000);
        child.stdout.on('data', (d) => {
          out += d;
          if (out.includes('Press Ctrl-C')) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
      const baseUrl = /base URL:\s+(\S+)/.exec(out)![1];
      const r = await call(`${baseUrl}/machines`, { headers: { authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_demo' } });
      expect(r.status).toBe(200);
      const deadline = Date.now() + 10_000;
      while (!err.includes('"msg":"request"') && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);

    const stdoutLines = out.trim().split('\n');
    expect(stdoutLines[0]).toBe('Tracking-service emulator running');
    expect(stdoutLines.filter((l) => l.trimStart().startsWith('{'))).toEqual([]);
    expect(stdoutLines[stdoutLines.length - 1]).toBe('Tracking-service emulator stopped');
    const logs = err.trim().split('\n').map((l) => JSON.parse(l) as { msg: string; level: string; path?: string; status?: number });
    expect(logs.map((l) => l.msg)).toEqual(['tracking-service emulator listening', 'request', 'tracking-service emulator stopped']);
    expect(logs[1]).toMatchObject({ level: 'debug', path: '/tracking/v1/machines', status: 200 });
    expect(err).not.toContain(DEMO_API_KEY);
  });
});
