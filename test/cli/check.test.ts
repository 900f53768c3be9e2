import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';

const ROOT = join(import.meta.dirname, '..', '..');
function cli(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), ...args], { encoding: 'utf8', env: { ...process.env, ...env }, cwd: ROOT, timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}
function file(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-cli-'));
  const f = join(dir, 'gw.yaml');
  writeFileSync(f, text);
  return f;
}

const GOOD = `
service:
  base_url: https://api.example.com/tracking/v1
  auth_url: https://auth.example.com
  organisation_id: org_acme
  auth: { mode: client_credentials, client_id: plant-a }
generator:
  - { name: gen, variables: [mvr_a, mvr_b] }
`;

describe('edge-gateway check', () => {
  it('validates, prints a summary with the secret origin and never the secret', () => {
    const r = cli(['check', '--config', file(GOOD)], { GATEWAY_CLIENT_SECRET: 'very-secret-value' });
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toContain('configuration is valid');
    expect(r.out).toContain('secret from env GATEWAY_CLIENT_SECRET');
    expect(r.out).toContain('generator:gen');
    expect(r.out).not.toContain('very-secret-value');
  });

  it('names every bad setting and value, exit code 2', () => {
    const r = cli(['check', '--config', file(`${GOOD}\nuplink:\n  batch_size: 250\n  flush_intervall: 1s\nbuffer:\n  when_full: drop\n`)], { GATEWAY_CLIENT_SECRET: 'x' });
    expect(r.code).toBe(2);
    expect(r.err).toContain('uplink.batch_size: 250 is above the maximum of 200');
    expect(r.err).toContain('uplink.flush_intervall: unknown setting (did you mean "flush_interval"?)');
    expect(r.err).toContain('buffer.when_full: "drop" is not one of drop_oldest, refuse_new');
  });

  it('reports a missing secret by name', () => {
    const env = { ...process.env };
    delete env.GATEWAY_CLIENT_SECRET;
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'check', '--config', file(GOOD)], { encoding: 'utf8', env, cwd: ROOT });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('service.auth.client_secret: environment variable GATEWAY_CLIENT_SECRET is not set (nor GATEWAY_CLIENT_SECRET_FILE)');
  });

  it('usage errors name the flag; --help works on every command without loading heavy modules', async () => {
    const bad = cli(['check', '--confg', 'x']);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--confg/);

    const top = cli(['--help']);
    expect(top.code).toBe(0);
    expect(top.out).toMatch(/^Usage: edge-gateway <command>/m);
    // Every command of the table in src/cli.ts is listed, and each one's help is tested below
    // (so a command added later is covered without editing this test).
    const listed = top.out.split('Commands:')[1].trim().split('\n').map((l) => l.trim().split(/\s+/)[0]);
    expect(listed).toEqual(expect.arrayContaining(['annotate', 'browse', 'check', 'demo', 'emulator', 'modbus-probe', 'run', 'set-aside', 'status']));

    const dir = mkdtempSync(join(tmpdir(), 'gw-help-'));
    // Packages that take long to load or open native bindings; a help text needs none of them.
    const HEAVY = ['node-opcua', 'modbus-serial', 'serialport', 'better-sqlite3', 'mqtt', 'aedes'];
    const results = await Promise.all(
      listed.map(async (command) => {
        const log = join(dir, `${command}.log`);
        // No GATEWAY_* variables and no config: help must need neither.
        const env = { IMPORT_LOG: log, NODE_OPTIONS: `--import ${join(import.meta.dirname, 'fixtures', 'import-log.mjs')}`, GATEWAY_CONFIG: undefined, GATEWAY_CLIENT_SECRET: undefined };
        const r = await runCli([command, '--help'], { env });
        const loaded = existsSync(log) ? [...new Set(readFileSync(log, 'utf8').split('\n').filter(Boolean))] : [];
        return { command, r, loaded };
      }),
    );
    for (const { command, r, loaded } of results) {
      expect(r.code, `${command} --help exit code (stderr: ${r.err})`).toBe(0);
      expect(r.out, `${command} --help`).toMatch(new RegExp(`Usage:\\s+edge-gateway ${command}\\b`));
      if (['browse', 'modbus-probe', 'annotate', 'status', 'check'].includes(command)) {
        expect(loaded.filter((p) => HEAVY.includes(p)), `${command} --help loaded`).toEqual([]);
      }
    }
  });

  it('the demo configuration is valid', () => {
    const r = cli(['check', '--config', join(ROOT, 'config', 'demo.yaml')], { GATEWAY_CLIENT_SECRET: 'demo-secret' });
    expect(r.code).toBe(0);
  });
});
