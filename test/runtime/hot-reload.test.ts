import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { validateConfig } from '../../src/config/load.js';
import { createLogger, silentLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { runUntilSignal, type RunningGateway } from '../../src/runtime/run.js';
import { testConfigInput } from '../helpers/gateway.js';
import { ROOT } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function setup(): Promise<{ emu: EmulatorHandle; dir: string; file: string; write: (sections: Record<string, unknown>) => void }> {
  const emu = await startEmulator({ port: 0 });
  cleanup.push(() => emu.close());
  const dir = mkdtempSync(join(tmpdir(), 'gw-reload-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gateway.yaml');
  const write = (sections: Record<string, unknown>) => writeFileSync(file, stringify(testConfigInput(emu, dir, sections)));
  return { emu, dir, file, write };
}

const gen = (variables: string[], name = 'gen') => ({ generator: [{ name, variables, interval: 50, shape: 'counter' }] });

describe('hot reload (in process)', () => {
  it('SIGHUP applies new sources without touching the buffer; a bad file is refused and the running config kept', async () => {
    const { emu, file, write } = await setup();
    write(gen(['mvr_gen_1']));
    const { config } = validateConfig(testConfigInput(emu, join(file, '..'), gen(['mvr_gen_1'])));
    const running: RunningGateway = await runUntilSignal(config, { logger: silentLogger(), configPath: file, watchConfig: false });
    cleanup.push(() => running.stop());
    const { handle } = running;
    await waitFor(() => emu.values('mvr_gen_1').length > 5, { what: 'mvr_gen_1 upstream' });

    // An outage holds samples in the buffer across the reload.
    emu.setFaults({ outage_seconds: 600 });
    await waitFor(() => handle.buffer.stats().rows > 40, { what: 'a backlog during the outage' });
    const oldSource = handle.sources[0];

    write({ ...gen(['mvr_gen_2']), uplink: { batch_size: 150 } });
    process.emit('SIGHUP', 'SIGHUP');
    await waitFor(() => handle.status().config.reloads_applied === 1, { what: 'reload applied' });
    const st = handle.status();
    expect(st.config.last_reload?.changed).toEqual(expect.arrayContaining(['generator', 'uplink.batch_size']));
    expect(st.config.last_reload?.restart_required).toEqual(['uplink.batch_size']);
    expect(handle.sources).toHaveLength(1);
    expect(handle.sources[0]).not.toBe(oldSource);
    expect(handle.config.generator[0].variables).toEqual(['mvr_gen_2']);
    // Settings that need a restart stay as they were started.
    expect(handle.config.uplink.batch_size).toBe(config.uplink.batch_size);
    await waitFor(() => handle.buffer.stats().committedTotal > 0 && handle.status().sources[0]?.samplesRead > 10, { what: 'the new source producing' });

    // Invalid file: refused, reason recorded, the running sources untouched.
    writeFileSync(file, stringify({ ...testConfigInput(emu, join(file, '..'), gen(['mvr_gen_2'])), uplink: { batch_size: 250 } }));
    const before = handle.sources[0];
    process.emit('SIGHUP', 'SIGHUP');
    await waitFor(() => handle.status().config.reloads_refused === 1, { what: 'reload refused' });
    expect(handle.status().config.last_reload?.problems?.join('\n')).toContain('uplink.batch_size: 250');
    expect(handle.sources[0]).toBe(before);

    // A source section that validates but cannot be built (duplicate names) is refused as a whole.
    write({ generator: [{ name: 'same', variables: ['mvr_gen_2'] }, { name: 'same', variables: ['mvr_gen_3'] }] });
    await expect(running.reload()).resolves.toBeNull();
    expect(handle.status().config.reloads_refused).toBe(2);
    expect(handle.sources[0]).toBe(before);

    // Everything committed before, during and after the reload reaches the service once the link is back.
    emu.clearFaults();
    await handle.sources[0].close();
    await handle.buffer.flush();
    await waitFor(() => handle.buffer.stats().rows === 0, { timeoutMs: 60_000, what: 'backlog delivered' });
    const stored = emu.values('mvr_gen_1').length + emu.values('mvr_gen_2').length;
    expect(stored).toBe(handle.buffer.stats().committedTotal);
    expect(emu.values('mvr_gen_2').length).toBeGreaterThan(10);
  }, 90_000);

  it('rebuilds only the source sections that changed', async () => {
    const { emu, dir, file, write } = await setup();
    const sections = { generator: [{ name: 'a', variables: ['mvr_gen_1'], interval: 100 }, { name: 'b', variables: ['mvr_gen_2'], interval: 100 }] };
    write(sections);
    const { config } = validateConfig(testConfigInput(emu, dir, { ...sections, log: { level: 'info' } }));
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', format: 'json', destination: { write: (l: string) => void lines.push(l) } });
    write({ ...sections, log: { level: 'info' } });
    const running = await runUntilSignal(config, { logger, configPath: file, watchConfig: false });
    cleanup.push(() => running.stop());
    // Loggers handed out before the reload (every component holds a child) follow a new log.level.
    const child = running.handle.logger.child({ component: 'probe' }).child({ part: 'deeper' });
    expect(child.isLevelEnabled('debug')).toBe(false);
    write({ ...sections, gateway: { status_interval: '1h' }, log: { level: 'debug' } });
    const result = await running.reload();
    expect(result?.changed.sort()).toEqual(['gateway.status_interval', 'log.level']);
    expect(result?.restartedSources).toEqual([]);
    expect(result?.restartRequired).toEqual([]);
    expect(child.isLevelEnabled('debug')).toBe(true);
    const unchanged = await running.reload();
    expect(unchanged?.changed).toEqual([]);
    expect(running.handle.status().config.last_reload?.outcome).toBe('unchanged');
  });

  it('reloads the operator annotations: a machine added to the file appears on the panel API', async () => {
    const { emu, dir, file, write } = await setup();
    const sections = (machines: string[]) => ({
      http: { enabled: true, host: '127.0.0.1', port: 0 },
      annotations: { site: { external_id: 'plant-a' }, machines: machines.map((key) => ({ key, name: key.toUpperCase() })) },
    });
    write(sections(['press1']));
    const { config } = validateConfig(testConfigInput(emu, dir, sections(['press1'])));
    const running = await runUntilSignal(config, { logger: silentLogger(), configPath: file, watchConfig: false });
    cleanup.push(() => running.stop());
    const panel = async () => ((await (await fetch(`${running.handle.httpUrl}/api/panel`)).json()) as { machines: Array<{ key: string }> }).machines.map((m) => m.key);
    expect(await panel()).toEqual(['press1']);
    write(sections(['press1', 'press2']));
    const result = await running.reload();
    expect(result?.annotations).toBe(true);
    expect(await panel()).toEqual(['press1', 'press2']);
    const started = await fetch(`${running.handle.httpUrl}/api/machines/press2/downtime/start`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(started.status).toBeLessThan(300);
  });
});

describe('edge-gateway run (child process)', () => {
  it('reloads when the file is saved, refuses a bad file with the reason logged, and stops on SIGTERM within 10 s losing nothing', async () => {
    const { emu, dir, file, write } = await setup();
    const sections = (variables: string[]) => ({ ...gen(variables), log: { level: 'info', format: 'json' }, http: { enabled: true, host: '127.0.0.1', port: 0 } });
    write(sections(['mvr_gen_1']));
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'run', '--config', file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    cleanup.push(() => void child.kill('SIGKILL'));
    const logs: Array<Record<string, unknown>> = [];
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    createInterface({ input: child.stdout }).on('line', (line) => {
      try {
        logs.push(JSON.parse(line));
      } catch {
        // not a log line
      }
    });
    const exited = new Promise<{ code: number | null; at: number }>((r) => child.on('exit', (code) => r({ code, at: Date.now() })));
    const started = await waitFor(() => logs.find((l) => l.msg === 'gateway started'), { timeoutMs: 30_000, what: `gateway started (stderr: ${stderr})` });
    const http = started.http as string;
    await waitFor(() => emu.values('mvr_gen_1').length > 3, { what: 'mvr_gen_1 upstream' });

    write(sections(['mvr_gen_3']));
    await waitFor(() => logs.find((l) => l.msg === 'configuration reloaded'), { timeoutMs: 20_000, what: 'configuration reloaded log' });
    await waitFor(() => emu.values('mvr_gen_3').length > 3, { what: 'mvr_gen_3 upstream after the reload' });
    const nGen1 = emu.values('mvr_gen_1').length;

    writeFileSync(file, 'generator:\n  - name: gen\n    variables: [mvr_gen_1]\n    interval: -5\n');
    const refused = await waitFor(() => logs.find((l) => l.msg === 'new configuration refused; the running configuration is kept'), { timeoutMs: 20_000, what: 'refusal log' });
    expect((refused.problems as string[]).join('\n')).toMatch(/service: /);
    expect((refused.problems as string[]).join('\n')).toMatch(/generator\[0\]\.interval: -5/);
    const status = (await (await fetch(`${http}/status`)).json()) as { config: { reloads_applied: number; reloads_refused: number; path: string } };
    expect(status.config).toMatchObject({ reloads_applied: 1, reloads_refused: 1, path: file });
    // Still the same process, still producing with the last good configuration.
    const n3 = emu.values('mvr_gen_3').length;
    await waitFor(() => emu.values('mvr_gen_3').length > n3 + 3, { what: 'still producing after the refusal' });
    expect(emu.values('mvr_gen_1').length).toBe(nGen1);

    // Graceful stop under load with the service unreachable: pending samples are committed, exit 0 within 10 s.
    const dropped0 = emu.stats().dropped_connections;
    emu.setFaults({ outage_seconds: 600 });
    // Under load: the gateway has met the outage (samples wait unsent) when it is told to stop.
    await waitFor(() => emu.stats().dropped_connections > dropped0, { what: 'a delivery attempt during the outage' });
    const sent = Date.now();
    child.kill('SIGTERM');
    const { code, at } = await exited;
    expect(code).toBe(0);
    expect(at - sent).toBeLessThan(10_000);
    expect(logs.some((l) => l.msg === 'gateway stopped')).toBe(true);
    emu.clearFaults();
    // What the service has plus what the buffer file still holds is every tick, for both variables:
    // the counter shape numbers ticks 0, 1, 2 … per source run, so a gap is a lost sample.
    const db = new BetterSqlite3(join(dir, 'buffer.db'), { readonly: true });
    const held = db.prepare('SELECT v.name AS variable, s.value FROM samples s JOIN variables v ON v.id = s.var').all() as Array<{ variable: string; value: number }>;
    db.close();
    for (const v of ['mvr_gen_1', 'mvr_gen_3']) {
      const values = new Set([...emu.values(v).map((x) => x.value), ...held.filter((h) => h.variable === v).map((h) => h.value)]);
      const max = Math.max(...values);
      expect(values.size, `${v}: ticks 0..${max}`).toBe(max + 1);
    }
  }, 90_000);
});
