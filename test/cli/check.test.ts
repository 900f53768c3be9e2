import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

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

  it('usage errors name the flag; --help works on every command', () => {
    const bad = cli(['check', '--confg', 'x']);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--confg/);
    for (const command of ['run', 'check', 'status', 'demo', 'emulator']) {
      const help = cli([command, '--help']);
      expect(help.code, `${command} --help`).toBe(0);
      expect(help.out + help.err).toMatch(/Usage/i);
    }
    const top = cli(['--help']);
    expect(top.out).toContain('Commands:');
  });

  it('the demo configuration is valid', () => {
    const r = cli(['check', '--config', join(ROOT, 'config', 'demo.yaml')], { GATEWAY_CLIENT_SECRET: 'demo-secret' });
    expect(r.code).toBe(0);
  });
});
