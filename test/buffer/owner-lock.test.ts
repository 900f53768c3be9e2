import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openBufferDatabase } from '../../src/store/file/database.js';
import { acquireBufferOwner, bufferOwnedByRunningGateway, lockPathFor } from '../../src/store/file/owner-lock.js';
import { gatewayStore } from '../../src/runtime/store-schemas.js';
import { silentLogger } from '../../src/core/logger.js';
import { startEmulator } from '../../src/emulator/index.js';
import { ROOT, runCli } from '../helpers/cli.js';
import { testConfigInput } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { GATEWAY_SCHEMAS } from '../../src/runtime/store-schemas.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-owner-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('one gateway per buffer file (in process)', () => {
  it('a second owner is refused with the setting, the file and the holder named; after release it is free again', () => {
    const dir = tempDir();
    const path = join(dir, 'buffer.db');
    const first = acquireBufferOwner(path);
    const { db } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
    gatewayStore(db).noteHolder();
    db.close();

    let error: unknown;
    try {
      acquireBufferOwner(path, { waitMs: 100 });
    } catch (err) {
      error = err;
    }
    expect((error as { code?: string }).code).toBe('BUFFER_IN_USE');
    expect(String((error as Error).message)).toBe(
      `buffer.path: ${path} is in use by edge-gateway pid ${process.pid} on ${(error as { details: { host: string } }).details.host}, running since ${(error as { details: { started_at: string } }).details.started_at}. Only one gateway may use a buffer file: stop the other one, or give this one its own buffer.path`,
    );
    expect(bufferOwnedByRunningGateway(path)).toBe(true);
    // Probing (as the CLI does) must not loosen the holder's lock.
    expect(() => acquireBufferOwner(path, { waitMs: 0 })).toThrow(/ is in use by edge-gateway pid /);

    first.release();
    first.release(); // twice is harmless
    expect(bufferOwnedByRunningGateway(path)).toBe(false);
    const again = acquireBufferOwner(path, { waitMs: 0 });
    again.release();
  });

  it('a lock file that is not a database (copied over, truncated) is replaced, not a reason to stop', () => {
    const dir = tempDir();
    const path = join(dir, 'buffer.db');
    writeFileSync(lockPathFor(path), 'this is not an SQLite database, just some bytes long enough to be read as a header...........');
    const owner = acquireBufferOwner(path, { waitMs: 0 });
    expect(bufferOwnedByRunningGateway(path)).toBe(true);
    owner.release();
  });

  it('a lock file that cannot be created names buffer.path and the lock file', () => {
    // A plain file where the buffer's folder should be: refused for every user, root included.
    const dir = tempDir();
    writeFileSync(join(dir, 'not-a-folder'), '');
    const path = join(dir, 'not-a-folder', 'buffer.db');
    expect(() => acquireBufferOwner(path)).toThrow(`buffer.path: the lock file ${path}.lock cannot be created or locked (E`);
  });
});

interface ChildGateway {
  child: ChildProcess;
  logs: Array<Record<string, unknown>>;
  stderr: () => string;
  exited: Promise<number | null>;
}

function spawnGateway(file: string): ChildGateway {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'run', '--config', file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  cleanup.push(() => void child.kill('SIGKILL'));
  const logs: Array<Record<string, unknown>> = [];
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      logs.push(JSON.parse(line));
    } catch {
      // not a log line
    }
  });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, logs, stderr: () => stderr, exited };
}

describe('one gateway per buffer file (two real processes)', () => {
  it('the second gateway is refused and the first keeps delivering; after a SIGKILL the next one starts at once and delivers the backlog', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const dir = tempDir();
    const file = join(dir, 'gateway.yaml');
    writeFileSync(
      file,
      stringify(testConfigInput(emu, dir, { generator: [{ name: 'gen', variables: ['mvr_gen_1'], interval: 50, shape: 'counter' }], log: { level: 'info', format: 'json' } })),
    );

    const first = spawnGateway(file);
    await waitFor(() => first.logs.find((l) => l.msg === 'gateway started'), { timeoutMs: 30_000, what: `first gateway started (stderr: ${first.stderr()})` });
    await waitFor(() => emu.values('mvr_gen_1').length > 5, { what: 'first gateway delivering' });

    // Same file, same buffer: refused before the buffer is touched.
    const second = await runCli(['run', '--config', file]);
    expect(second.code).toBe(1);
    expect(second.err).toContain(`buffer.path: ${join(dir, 'buffer.db')} is in use by edge-gateway pid ${first.child.pid} on `);
    expect(second.err).toContain('stop the other one, or give this one its own buffer.path');
    expect(readdirSync(dir).filter((f) => f.includes('damaged'))).toEqual([]);

    // The first one never noticed.
    const n = emu.values('mvr_gen_1').length;
    await waitFor(() => emu.values('mvr_gen_1').length > n + 5, { what: 'first gateway still delivering' });

    // Tools that would change rows under the running gateway refuse; listing still works.
    const requeue = await runCli(['set-aside', 'requeue', '--db', join(dir, 'buffer.db'), '--all']);
    expect(requeue.code).toBe(1);
    expect(requeue.err).toContain(`a gateway is running on ${join(dir, 'buffer.db')}; requeue through it instead`);
    const list = await runCli(['set-aside', 'list', '--db', join(dir, 'buffer.db')]);
    expect(list.err).toBe('');
    expect(list.code).toBe(0);

    // A crash leaves no stale lock: the kernel released it with the process.
    emu.setFaults({ outage_seconds: 600 });
    const upstreamAtKill = emu.values('mvr_gen_1').length;
    // A backlog builds while the service is out: read from the running gateway's buffer file.
    const buffered = () => {
      const db = new Database(join(dir, 'buffer.db'), { readonly: true, fileMustExist: true });
      try {
        return (db.prepare('SELECT COUNT(*) AS n FROM samples').get() as { n: number }).n;
      } finally {
        db.close();
      }
    };
    await waitFor(() => buffered() >= 15, { what: 'a backlog of 15 samples in the buffer during the outage' });
    first.child.kill('SIGKILL');
    await first.exited;
    const killedAt = Date.now();
    expect(existsSync(lockPathFor(join(dir, 'buffer.db')))).toBe(true);
    emu.clearFaults();
    const third = spawnGateway(file);
    await waitFor(() => third.logs.find((l) => l.msg === 'gateway started'), { timeoutMs: 30_000, what: `gateway after the crash started (stderr: ${third.stderr()})` });
    // The counter numbers ticks 0, 1, 2 … per run: the killed run's ticks must all arrive, the
    // backlog held during the outage included, with no gap.
    await waitFor(
      () => {
        const firstRun = emu.values('mvr_gen_1').filter((v) => Date.parse(v.timestamp) < killedAt).map((v) => v.value);
        const max = Math.max(...firstRun);
        return firstRun.length >= upstreamAtKill + 10 && new Set(firstRun).size === max + 1;
      },
      { timeoutMs: 30_000, what: "the killed gateway's backlog delivered by its successor without a gap" },
    );
    await waitFor(() => emu.values('mvr_gen_1').some((v) => Date.parse(v.timestamp) > killedAt), { what: 'the successor delivering its own samples' });
    third.child.kill('SIGTERM');
    expect(await third.exited).toBe(0);
  }, 120_000);
});
