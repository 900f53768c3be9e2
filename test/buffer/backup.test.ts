import BetterSqlite3 from 'better-sqlite3';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator } from '../../src/emulator/index.js';
import { runCli } from '../helpers/cli.js';
import { startTestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe('edge-gateway backup', () => {
  it('copies the buffer of a running gateway consistently, and the copy restores to a gateway that delivers it', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    emu.setFaults({ outage_seconds: 600 });
    const gw = await startTestGateway(emu, { generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: 5 }, interval: 10, shape: 'counter' }] });
    cleanup.push(() => gw.destroy());
    await waitFor(() => gw.handle.buffer.stats().rows > 500, { what: 'a backlog' });
    const before = gw.handle.buffer.stats().rows;
    const copy = join(gw.dir, 'copy.db');
    // Taken while the generator keeps committing every 10 ms.
    const r = await runCli(['backup', '--db', join(gw.dir, 'buffer.db'), '--to', copy]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/backup written: .*copy\.db \(.* MB, [\d,]+ unsent samples, 0 set aside; integrity ok/);
    const db = new BetterSqlite3(copy, { readonly: true });
    const rows = db.prepare('SELECT seq, var, ts, value FROM samples ORDER BY seq').raw().all() as Array<[number, number, number, number]>;
    db.close();
    expect(rows.length).toBeGreaterThanOrEqual(before);
    // A snapshot: whole ticks only (5 variables per commit), contiguous seqs.
    expect(rows.length % 5).toBe(0);
    expect(rows[rows.length - 1][0] - rows[0][0] + 1).toBe(rows.length);

    // --config needs only buffer.path: it works in a shell without the gateway's secret.
    const cfg = join(gw.dir, 'gw.yaml');
    writeFileSync(cfg, `service:\n  base_url: http://127.0.0.1:1/tracking/v1\n  auth_url: http://127.0.0.1:1\n  organisation_id: org_demo\n  auth: { mode: client_credentials, client_id: c, client_secret: { env: EDGE_TEST_UNSET_SECRET } }\nbuffer: { path: ${join(gw.dir, 'buffer.db')} }\n`);
    const viaConfig = await runCli(['backup', '--config', cfg, '--to', join(gw.dir, 'copy2.db')], { env: { EDGE_TEST_UNSET_SECRET: undefined } });
    expect(viaConfig.err).toBe('');
    expect(viaConfig.code).toBe(0);

    // Refuses to overwrite, names the flag.
    const again = await runCli(['backup', '--db', join(gw.dir, 'buffer.db'), '--to', copy]);
    expect(again.code).toBe(1);
    expect(again.err).toContain('--to: ');
    const usage = await runCli(['backup', '--to', join(gw.dir, 'x.db')]);
    expect(usage.code).toBe(2);
    expect(usage.err).toContain('give either --config FILE or --db PATH');

    // Restore: a gateway started on the copy delivers exactly the samples it holds.
    await gw.close();
    emu.clearFaults();
    const restored = await startTestGateway(emu, { buffer: { path: copy } });
    cleanup.push(() => restored.destroy());
    await waitFor(() => restored.handle.buffer.stats().rows === 0, { timeoutMs: 60_000, what: 'the restored backlog delivered' });
    const stored = Object.values(emu.valueCounts()).reduce((a, b) => a + b, 0);
    expect(stored).toBe(rows.length);
    expect(existsSync(copy)).toBe(true);
  }, 90_000);
});
