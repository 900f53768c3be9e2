import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { annotateCommand } from '../../src/commands/annotate.js';
import { UsageError } from '../../src/commands/flags.js';
import { DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANISATION_ID } from '../../src/emulator/demo-fixture.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { call, startHarness, stored, waitFor, type Harness } from './helpers.js';

const ROOT = join(import.meta.dirname, '..', '..');

/** Runs the real CLI in a child process (asynchronously: the gateway it talks to runs in this process). */
function cli(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), ...args], { cwd: ROOT, timeout: 30_000, encoding: 'utf8' }, (err, stdout, stderr) => {
      resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await annotateCommand(argv, { out: (t) => (out += t), err: (t) => (err += t) });
  return { code, out, err };
}

let emu: EmulatorHandle;
let h: Harness;
let dir: string;
beforeAll(async () => {
  emu = await startEmulator({ port: 0 });
  h = await startHarness({ emu });
  dir = mkdtempSync(join(tmpdir(), 'gw-annotate-cli-'));
});
afterAll(async () => {
  await h.close();
  await emu.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A config file for the CLI: the harness gateway's HTTP address and the emulator's credentials. */
function configFile(extra: { http?: Record<string, unknown>; annotations?: boolean } = {}): string {
  const port = Number(new URL(h.url).port);
  const http = { host: '127.0.0.1', port, ...(extra.http ?? {}) };
  const yaml = [
    'gateway: { name: cli-gw }',
    `service: { base_url: "${emu.baseUrl}", auth_url: "${emu.authUrl}", organisation_id: ${DEMO_ORGANISATION_ID}, auth: { mode: client_credentials, client_id: ${DEMO_CLIENT_ID}, client_secret: ${DEMO_CLIENT_SECRET} } }`,
    `http: ${JSON.stringify(http)}`,
    ...(extra.annotations === false ? [] : ['annotations: { site: { external_id: plant-demo }, machines: [ { key: press1, machine_variables: [mvr_press1_state] } ] }']),
  ].join('\n');
  const file = join(dir, `config-${Math.random().toString(16).slice(2)}.yaml`);
  writeFileSync(file, yaml);
  return file;
}

const T0 = '2026-03-01T08:00:00Z';
const T1 = '2026-03-01T09:00:00Z';

/** §2.3 rules a command line can break, with the field the error names. */
const CLI_INVALID: Array<{ name: string; args: string[]; field: string }> = [
  { name: 'blank text', args: ['instant', '--text', '   '], field: 'text' },
  { name: 'text over 5000', args: ['instant', '--text', 'x'.repeat(5_001)], field: 'text' },
  { name: 'time without offset', args: ['instant', '--text', 'x', '--at', '2026-03-01T08:00:00'], field: 'occurred_at' },
  { name: 'time not a date', args: ['instant', '--text', 'x', '--at', 'yesterday'], field: 'occurred_at' },
  { name: 'end before start', args: ['range', '--text', 'x', '--start', T1, '--end', T0], field: 'ended_at' },
  { name: 'end equal to start', args: ['range', '--text', 'x', '--start', T0, '--end', T0], field: 'ended_at' },
  { name: 'start not a date', args: ['range', '--text', 'x', '--start', '8 o\'clock', '--end', T1], field: 'started_at' },
  { name: 'bad variable id', args: ['instant', '--text', 'x', '--variable', 'mch_press1'], field: 'machine_variables[0].id' },
  { name: 'over 100 variables', args: ['instant', '--text', 'x', ...Array.from({ length: 101 }, (_, i) => ['--variable', `mvr_v${i}`]).flat()], field: 'machine_variables' },
  { name: 'site by id and external id', args: ['instant', '--text', 'x', '--site-id', 'ste_demo1', '--site-external-id', 'plant-demo'], field: 'site' },
  { name: 'bad site id', args: ['instant', '--text', 'x', '--site-id', 'plant'], field: 'site.id' },
  { name: 'bad site external id', args: ['instant', '--text', 'x', '--site-external-id', 'plant demo'], field: 'site.external_id' },
  { name: 'external id with bad characters', args: ['instant', '--text', 'x', '--external-id', 'a/b'], field: 'external_id' },
  { name: 'external id too long', args: ['instant', '--text', 'x', '--external-id', 'e'.repeat(101)], field: 'external_id' },
  { name: 'unknown machine', args: ['instant', '--text', 'x', '--machine', 'lathe9'], field: 'machine' },
];

describe('edge-gateway annotate (through the gateway\'s local API)', () => {
  it('creates an instant annotation and waits for its delivery', async () => {
    const r = await run(['instant', '--url', h.url, '--text', 'Shift start', '--variable', 'mvr_press1_speed', '--at', '2026-03-01T06:00:00+01:00', '--wait', '15']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const id = /queued: (\S+)/.exec(r.out)![1];
    expect(r.out).toMatch(new RegExp(`delivered: ${id} \\(mda_`));
    expect(stored(emu, id)[0]).toMatchObject({ type: 'instant', occurred_at: '2026-03-01T05:00:00.000Z', text: 'Shift start', machine_variables: [{ id: 'mvr_press1_speed' }] });
    const list = await call(h.url, 'GET', `/api/annotations/${id}`);
    expect(list.body.annotation.origin).toBe('cli');
  });

  it('creates a range with --config (address from http.host/port), idempotent with --external-id', async () => {
    const file = configFile();
    const ext = `cli-range-${Date.now()}`;
    const args = ['range', '--config', file, '--text', 'Changeover', '--start', T0, '--end', T1, '--machine', 'press1', '--external-id', ext, '--json'];
    const first = await run(args);
    expect(first.code).toBe(0);
    expect(JSON.parse(first.out).annotation).toMatchObject({ external_id: ext, type: 'range', machine_variables: ['mvr_press1_state', 'mvr_press1_speed'] });
    const again = await run(args);
    expect(again.code).toBe(0);
    await waitFor(() => stored(emu, ext).length === 1);
    expect(stored(emu, ext)).toHaveLength(1);
  });

  it('starts, lists and stops a downtime', async () => {
    expect((await run(['start', '--url', h.url, '--machine', 'mixer1', '--reason', 'Cleaning'])).code).toBe(0);
    const dup = await run(['start', '--url', h.url, '--machine', 'mixer1']);
    expect(dup.code).toBe(2);
    expect(dup.err).toMatch(/machine: "mixer1" already has a downtime open/);
    const stop = await run(['stop', '--url', h.url, '--machine', 'mixer1', '--text', 'CIP cycle', '--wait', '15']);
    expect(stop.code).toBe(0);
    expect(stop.out).toMatch(/delivered: /);
    const list = await run(['list', '--url', h.url, '--machine', 'mixer1']);
    expect(list.code).toBe(0);
    expect(list.out).toMatch(/range .*delivered {2}"Cleaning: CIP cycle"/);
    const unknown = await run(['stop', '--url', h.url, '--machine', 'lathe9']);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toMatch(/machine: "lathe9" is not a configured machine/);
  });

  for (const c of CLI_INVALID) {
    it(`refuses ${c.name}, naming ${c.field} (exit 2)`, async () => {
      const r = await run([...c.args, '--url', h.url]);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(new RegExp(`^edge-gateway annotate: (.|\\n)*${c.field.replace(/[[\].]/g, '\\$&')}: `));
    });
  }

  it('refuses incomplete commands as usage errors', async () => {
    await expect(run(['range', '--url', h.url, '--text', 'x', '--start', T0])).rejects.toThrow(UsageError);
    await expect(run(['instant', '--url', h.url])).rejects.toThrow(/--text TEXT is required/);
    await expect(run(['stop', '--url', h.url])).rejects.toThrow(/--machine/);
    await expect(run(['frobnicate', '--url', h.url])).rejects.toThrow(/unknown action/);
    await expect(run(['instant', '--text', 'x', '--bogus'])).rejects.toThrow(/bogus/);
  });

  it('says so when no gateway answers', async () => {
    const r = await run(['instant', '--url', 'http://127.0.0.1:1', '--text', 'x']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/no gateway answers at http:\/\/127\.0\.0\.1:1/);
  });

  it('sends the token from --token, $GATEWAY_API_TOKEN or the config\'s http.api_token when the API needs one', async () => {
    const guarded = await startHarness({ emu, sections: { http: { enabled: true, port: 0, host: '0.0.0.0', api_token: 'cli-token-42-abcdefgh' } } });
    try {
      const url = guarded.url;
      const none = await run(['instant', '--url', url, '--text', 'x']);
      expect(none.code).toBe(1);
      expect(none.err).toMatch(/api_token/);
      expect((await run(['instant', '--url', url, '--text', 'with flag', '--token', 'cli-token-42-abcdefgh'])).code).toBe(0);
      process.env.GATEWAY_API_TOKEN = 'cli-token-42-abcdefgh';
      try {
        expect((await run(['instant', '--url', url, '--text', 'with env'])).code).toBe(0);
      } finally {
        delete process.env.GATEWAY_API_TOKEN;
      }
      const port = Number(new URL(url).port);
      const file = join(dir, 'guarded.yaml');
      writeFileSync(
        file,
        `service: { base_url: "${emu.baseUrl}", auth_url: "${emu.authUrl}", organisation_id: org_demo, auth: { mode: client_credentials, client_id: x, client_secret: y } }\nhttp: { host: 0.0.0.0, port: ${port}, api_token: cli-token-42-abcdefgh }\n`,
      );
      expect((await run(['instant', '--config', file, '--text', 'with config'])).code).toBe(0);
    } finally {
      await guarded.close();
    }
  });

  it('runs as `edge-gateway annotate` from the command line', async () => {
    const r = await cli(['annotate', 'instant', '--url', h.url, '--text', 'From a shell script', '--json']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout).annotation).toMatchObject({ text: 'From a shell script', state: 'queued' });
    const bad = await cli(['annotate', 'instant', '--url', h.url, '--text', ' ']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/text: must not be blank/);
    const usage = await cli(['annotate', 'range', '--url', h.url, '--text', 'x']);
    expect(usage.status).toBe(2);
    expect(usage.stderr).toMatch(/--start TIME is required/);
  });
});

describe('edge-gateway annotate --direct (straight to the service)', () => {
  it('delivers, and a repeat with the same --external-id counts as delivered (409)', async () => {
    const file = configFile({ annotations: true });
    const ext = `cli-direct-${Date.now()}`;
    const first = await run(['instant', '--direct', '--config', file, '--text', 'Direct', '--machine', 'press1', '--external-id', ext]);
    expect(first.err).toBe('');
    expect(first.code).toBe(0);
    expect(first.out).toMatch(new RegExp(`delivered: ${ext} \\(mda_`));
    const again = await run(['instant', '--direct', '--config', file, '--text', 'Direct', '--machine', 'press1', '--external-id', ext]);
    expect(again.code).toBe(0);
    expect(again.out).toMatch(/already delivered/);
    expect(stored(emu, ext)).toHaveLength(1);
    expect(stored(emu, ext)[0]).toMatchObject({ machine_variables: [{ id: 'mvr_press1_state' }], site: { external_id: 'plant-demo' } });
  });

  it('generates a gateway-prefixed id, and reports the service\'s refusal', async () => {
    const file = configFile();
    const ok = await run(['range', '--direct', '--config', file, '--text', 'Generated id', '--start', T0, '--end', T1]);
    expect(ok.code).toBe(0);
    expect(ok.out).toMatch(/delivered: cli-gw-[0-9a-f]{32}/);
    const refused = await run(['instant', '--direct', '--config', file, '--text', 'x', '--variable', 'mvr_lathe1_speed']);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/refused the annotation: HTTP 400.*not available at site/);
  });

  for (const c of CLI_INVALID) {
    it(`checks locally first: ${c.name} → ${c.field} (exit 2)`, async () => {
      const before = emu.annotations().length;
      const r = await run([...c.args, '--direct', '--config', configFile()]);
      expect(r.code).toBe(2);
      expect(r.err).toContain(`${c.field}: `);
      expect(emu.annotations().length).toBe(before);
    });
  }

  it('needs a site when the config has no annotations section', async () => {
    await expect(run(['instant', '--direct', '--config', configFile({ annotations: false }), '--text', 'x'])).rejects.toThrow(/--site-id/);
    const r = await run(['instant', '--direct', '--config', configFile({ annotations: false }), '--text', 'No section', '--site-id', 'ste_demo1']);
    expect(r.code).toBe(0);
  });
});
