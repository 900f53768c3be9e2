import BetterSqlite3 from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { validateConfig } from '../../src/config/load.js';
import type { GatewayConfigInput } from '../../src/config/schema.js';
import { silentLogger } from '../../src/core/logger.js';
import { DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANISATION_ID } from '../../src/emulator/demo-fixture.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';

export interface EmulatorAddress {
  baseUrl: string;
  authUrl: string;
}

type Sections = { [K in keyof GatewayConfigInput]?: unknown };

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Keys whose value is a variant (discriminated by `mode`/`type`): replaced whole, never merged. */
const REPLACED = new Set(['auth']);

/** Deep merge of plain objects; arrays, scalars and variant objects in `over` replace. */
export function merge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = !REPLACED.has(k) && isPlainObject(v) && isPlainObject(out[k]) ? merge(out[k] as Record<string, unknown>, v) : v;
  }
  return out;
}

/**
 * A raw config for a gateway talking to `emulator` with the demo fixture's credentials, a buffer in
 * `dir`, the HTTP server off and a short flush interval; `sections` are merged over it.
 */
export function testConfigInput(emulator: EmulatorAddress, dir: string, sections: Sections = {}): Record<string, unknown> {
  const base = {
    gateway: { name: 'test-gw', data_dir: join(dir, 'data'), status_interval: 0 },
    log: { level: 'silent' },
    service: {
      base_url: emulator.baseUrl,
      auth_url: emulator.authUrl,
      organisation_id: DEMO_ORGANISATION_ID,
      auth: { mode: 'client_credentials', client_id: DEMO_CLIENT_ID, client_secret: DEMO_CLIENT_SECRET },
      request_timeout: 5_000,
    },
    uplink: { flush_interval: 100 },
    buffer: { path: join(dir, 'buffer.db'), commit_interval: 20 },
    http: { enabled: false, port: 0 },
  };
  return merge(base, sections as Record<string, unknown>);
}

export interface TestGateway {
  handle: GatewayHandle;
  dir: string;
  close(): Promise<void>;
  /** Closes and removes the temp directory. */
  destroy(): Promise<void>;
}

/** Starts a real gateway in this process against the emulator. */
export async function startTestGateway(emulator: EmulatorAddress, sections: Sections = {}, options: { logger?: Logger; dir?: string } = {}): Promise<TestGateway> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'gw-e2e-'));
  const { config } = validateConfig(testConfigInput(emulator, dir, sections));
  const handle = await startGateway(config, { logger: options.logger ?? silentLogger() });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle.close();
  };
  return {
    handle,
    dir,
    close,
    destroy: async () => {
      await close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Runs `fn` on a connection of its own to a running gateway's buffer file (WAL: readers and a
 * short writer beside the gateway's connection), closed afterwards. The gateway offers no
 * database handle (src/buffer/README.md); tests that seed or inspect the file go through this.
 */
export function withBufferFile<T>(gw: TestGateway | GatewayHandle, fn: (db: BetterSqlite3.Database) => T): T {
  const handle = 'handle' in gw ? gw.handle : gw;
  const db = new BetterSqlite3(handle.config.buffer.path, { timeout: 10_000 });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}
