import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { runUntilSignal, type RunningGateway } from '../../src/runtime/run.js';
import { runCli } from '../helpers/cli.js';
import { testConfigInput } from '../helpers/gateway.js';
import { captureLines } from '../helpers/log.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The configuration file's history over real HTTP, with a gateway that watches its file (as `run`
 * does): the console's Apply logs what it changed and keeps a version (time, user agent, what the
 * reload changed); the watcher's reload after it says what was applied, not "nothing changed"; an
 * edit made elsewhere is kept too; the CLI lists the versions, shows one and rolls back (the
 * running gateway then reloads the file it wrote).
 */
let emu: EmulatorHandle;
let dir: string;
let file: string;
let running: RunningGateway;
const { logger, lines } = captureLines();
const gen = (variables: string[]) => [{ name: 'gen', variables, interval: 200, shape: 'counter' }];
const textWith = (variables: string[]) => stringify(testConfigInput(emu, dir, { log: { level: 'debug' }, http: { enabled: true, port: 0 }, generator: gen(variables) }));

beforeAll(async () => {
  emu = await startEmulator({ port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'config-history-'));
  file = join(dir, 'gateway.yaml');
  writeFileSync(file, textWith(['mvr_gen_1']));
  const { config } = loadConfigFile(file);
  running = await runUntilSignal(config, { logger, configPath: file, watchConfig: true, onStatus: () => undefined });
}, 60_000);

afterAll(async () => {
  await running?.stop();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const api = (path: string, init: RequestInit = {}) => fetch(`${running.handle.httpUrl}${path}`, { ...init, headers: { 'content-type': 'application/json', 'user-agent': 'plant-laptop/2.1 (test)', ...(init.headers ?? {}) } });
const messages = () => lines.map((l) => String(l.msg));

describe('the configuration history', () => {
  it('Apply logs what it changed and keeps a version; the watcher then says what was applied, not "nothing changed"', async () => {
    const applied = await api('/console/api/config', { method: 'PUT', body: JSON.stringify({ yaml: textWith(['mvr_gen_1', 'mvr_gen_2']) }) });
    expect(applied.status).toBe(200);
    const body = (await applied.json()) as { version: number; changed: string[] };
    expect(body).toMatchObject({ version: 2, changed: ['generator'] });
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'configuration written and applied from the console (console apply): changed generator', by: 'console apply', version: 2, user_agent: 'plant-laptop/2.1 (test)', changed: ['generator'] }));
    const watched = await waitFor(() => lines.find((l) => String(l.msg).startsWith('configuration file written by the console')), { timeoutMs: 20_000, what: 'the watcher seeing the file Apply wrote' });
    expect(watched).toMatchObject({ msg: 'configuration file written by the console (console apply, version 2), applied by it: changed generator', trigger: 'file changed', changed: ['generator'] });
    expect(messages()).not.toContain('configuration reloaded: nothing changed');
    expect(running.handle.status().config.reloads_applied).toBe(1);

    const history = (await (await api('/console/api/config/history')).json()) as { current: number; versions: Array<Record<string, unknown>> };
    expect(history.current).toBe(2);
    expect(history.versions.map((v) => [v.version, v.by, v.user_agent, v.changed])).toEqual([
      [2, 'console apply', 'plant-laptop/2.1 (test)', ['generator']],
      [1, 'gateway started', null, null],
    ]);
    const v2 = (await (await api('/console/api/config/history/2')).json()) as { diff: string; rollback_diff: string };
    expect(v2.diff).toContain('+      - mvr_gen_2');
    expect(v2.rollback_diff).toBe('');
    // A version holds the secrets written in the file: only the gateway's user reads it.
    expect(statSync(join(dir, 'data', 'config-history', 'v000002.yaml')).mode & 0o777).toBe(0o600);
    expect((await api('/console/api/config/history/7')).status).toBe(404);
  });

  it('an edit made elsewhere is reloaded and kept; the CLI lists, shows, and rolls back (the gateway reloads what it wrote)', async () => {
    writeFileSync(file, textWith(['mvr_gen_3']));
    await waitFor(() => running.handle.config.generator[0].variables.join() === 'mvr_gen_3', { timeoutMs: 20_000, what: 'the edit reloaded' });
    await waitFor(() => (JSON.parse(readFileSync(join(dir, 'data', 'config-history', 'index.json'), 'utf8')) as { entries: unknown[] }).entries.length === 3, { what: 'the edit kept' });

    const listed = await runCli(['config', 'history', '--config', file]);
    expect(listed.code).toBe(0);
    const rows = listed.out.trim().split('\n');
    expect(rows[0]).toMatch(/^\* version 3 {2}\S+Z {2}file changed {2}\d[\d,]* bytes; changed generator$/);
    expect(rows[1]).toMatch(/^ {2}version 2 {2}\S+Z {2}console apply {2}\[plant-laptop\/2\.1 \(test\)\] {2}\d[\d,]* bytes; changed generator$/);
    expect(rows[2]).toMatch(/^ {2}version 1 {2}\S+Z {2}gateway started/);

    const shown = await runCli(['config', 'show', '2', '--config', file]);
    expect(shown.out).toContain('+      - mvr_gen_2');
    // The client secret written in the file never shows in a diff.
    expect(shown.out + listed.out).not.toContain(String((testConfigInput(emu, dir).service as { auth: { client_secret: string } }).auth.client_secret));

    const dry = await runCli(['config', 'rollback', '2', '--config', file]);
    expect(dry.code).toBe(0);
    expect(dry.out).toContain('-      - mvr_gen_3');
    expect(dry.out).toContain('run again with --yes to write it');
    expect(readFileSync(file, 'utf8')).toBe(textWith(['mvr_gen_3']));

    const done = await runCli(['config', 'rollback', '2', '--config', file, '--yes']);
    expect(done.code).toBe(0);
    expect(done.out).toContain('is version 2 again (kept as version 4)');
    expect(readFileSync(file, 'utf8')).toBe(textWith(['mvr_gen_1', 'mvr_gen_2']));
    await waitFor(() => running.handle.config.generator[0].variables.join() === 'mvr_gen_1,mvr_gen_2', { timeoutMs: 20_000, what: 'the rollback reloaded' });
    const history = (await (await api('/console/api/config/history')).json()) as { current: number; versions: Array<{ version: number; by: string; note: string | null; user_agent: string | null }> };
    expect(history.current).toBe(4);
    expect(history.versions[0]).toMatchObject({ version: 4, by: 'cli rollback', note: 'rollback to version 2', user_agent: expect.stringMatching(/^edge-gateway \S+ \(.+\)$/) });

    expect((await runCli(['config', 'rollback', '99', '--config', file])).code).toBe(2);
  }, 300_000);
});
