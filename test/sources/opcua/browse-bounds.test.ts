import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../../src/runtime/gateway.js';
import { validateConfig } from '../../../src/config/load.js';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { runBrowseCli, type CliIo } from '../../../src/sources/opcua/browse-cli.js';
import { testConfigInput } from '../../helpers/gateway.js';
import { tmpPki } from './helpers.js';

/**
 * Issue 21 §2: browsing (edge-gateway browse and the console) a real node-opcua server that breaks
 * the rules (src/sim/opcua-misbehaving.ts): an object whose Browse and BrowseNext always answer a
 * page of 1,000 new references with a continuation point, and objects that organize each other.
 * Before the fix the walk took every page before applying --max-nodes (the server gives up after
 * 200 pages only so that the old code fails by a count instead of exhausting the machine).
 */
let sim: OpcuaSimulator;
let emu: EmulatorHandle;
let gw: GatewayHandle;
let dir: string;
const pki = tmpPki('opcua-browse-bounds-client-');

beforeAll(async () => {
  sim = await startOpcuaSimulator({ pkiDir: tmpPki('opcua-browse-bounds-sim-'), misbehave: { endlessBrowse: { pageSize: 1_000, maxPages: 200 }, referenceLoop: true, bigValue: 600_000 } });
  emu = await startEmulator({ port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'opcua-browse-bounds-gw-'));
  gw = await startGateway(validateConfig(testConfigInput(emu, dir, { http: { enabled: true, port: 0 } })).config, { logger: silentLogger() });
}, 60_000);
afterAll(async () => {
  await gw?.close();
  await emu?.close();
  await sim?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function browse(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = { stdout: (t) => void (out += t), stderr: (t) => void (err += t), env: {} };
  const code = await runBrowseCli(['--endpoint', sim.endpointUrl, '--pki-dir', pki, ...args], io);
  return { code, out, err };
}

const counters = () => ({ ...sim.misbehaviour!.counters });

describe('browsing a server that breaks the rules (issue 21 §2)', () => {
  it('edge-gateway browse: BrowseNext that never ends stops at --max-nodes while browsing, and the continuation point is released', async () => {
    const before = counters();
    const r = await browse(['--root', sim.misbehaviour!.nodeIds.endlessBrowse!, '--depth', '1', '--max-nodes', '3000']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toContain('... stopped after 3000 nodes (raise --max-nodes or narrow --root)');
    const after = counters();
    // 1,000 references in the Browse answer, two BrowseNext for 2,000 more, then the limit: the
    // continuation point is given back. Before: all 199 BrowseNext answers were read first.
    expect(after.browseNexts - before.browseNexts).toBe(2);
    expect(after.browseReleases - before.browseReleases).toBe(1);
  });

  it('edge-gateway browse: a server that answers slowly for ever is left at --timeout', async () => {
    sim.misbehaviour!.configureBrowse({ pageSize: 1, pageDelayMs: 200 });
    try {
      const t0 = performance.now();
      const r = await browse(['--root', sim.misbehaviour!.nodeIds.endlessBrowse!, '--depth', '1', '--timeout', '2']);
      const seconds = (performance.now() - t0) / 1000;
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      expect(r.out).toMatch(/\.\.\. stopped after \d+ nodes: the time limit was reached \(raise --timeout or narrow --root\)/);
      // Connecting takes a moment too; the walk itself stopped after 2 s and one slow page.
      expect(seconds).toBeLessThan(15);
      const bad = await browse(['--timeout', 'soon']);
      expect(bad.code).toBe(2);
      expect(bad.err).toContain('--timeout: "soon" is not a number of seconds from 1 to 3600');
    } finally {
      sim.misbehaviour!.configureBrowse({ pageSize: 1_000, pageDelayMs: 0 });
    }
  });

  it('edge-gateway browse: objects that organize each other are listed once per parent and descended into once', async () => {
    const r = await browse(['--root', sim.misbehaviour!.nodeIds.referenceLoop!, '--depth', '20']);
    expect(r.code).toBe(0);
    const lines = r.out.split('\n').filter((l) => /^\s+[ABC]\/ /.test(l));
    // A, B, C under the root, and under each the two others (listed, not expanded again): 9 lines.
    // Before: every level expanded again, 2^depth paths until --max-nodes.
    expect(lines).toHaveLength(9);
    expect(r.out).not.toContain('stopped after');
  });

  it('edge-gateway browse: a value larger than max_message_size (4 MiB) is shown as too large, and the browse goes on', async () => {
    const r = await browse(['--root', sim.misbehaviour!.nodeIds.bigValue!.replace('.BigValue', ''), '--depth', '1']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^ {2}BigValue {2}ns=\d+;s=Misbehaving\.BigValue {2}Double\[\] = BadResponseTooLarge {2}\(not mappable: array\)$/m);
    expect(r.out).toMatch(/^ {2}ReferenceLoop\/ /m);
  });

  it('console: listing the folder that holds the endless node looks at one page of it, gives the continuation point back, and says it can be expanded', async () => {
    const before = counters();
    const folder = sim.misbehaviour!.nodeIds.endlessBrowse!.replace('.EndlessBrowse', '');
    const res = await fetch(`${gw.httpUrl}/console/api/opcua/browse`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ endpoint: sim.endpointUrl, root: folder, path: 'Misbehaving' }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { truncated: boolean; nodes: Array<{ path: string; hasChildren?: boolean }> };
    expect(body.truncated).toBe(false);
    // One level (the tree's default): the folder's children, not the endless node's.
    expect(body.nodes.map((n) => n.path).sort()).toEqual(['Misbehaving/BigValue', 'Misbehaving/EndlessBrowse', 'Misbehaving/ReferenceLoop']);
    expect(body.nodes.find((n) => n.path === 'Misbehaving/EndlessBrowse')?.hasChildren).toBe(true);
    expect(body.nodes.find((n) => n.path === 'Misbehaving/BigValue')?.hasChildren).toBe(false);
    const after = counters();
    // The look-ahead took the first page only: no BrowseNext, its continuation point released.
    expect(after.browseNexts - before.browseNexts).toBe(0);
    expect(after.browseReleases - before.browseReleases).toBe(1);
    expect(sim.continuationPoints()).toBe(0);
  });

  it('console: POST /console/api/opcua/browse stops at max_nodes while browsing and says so', async () => {
    const before = counters();
    const res = await fetch(`${gw.httpUrl}/console/api/opcua/browse`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ endpoint: sim.endpointUrl, root: sim.misbehaviour!.nodeIds.endlessBrowse, depth: 1, max_nodes: 2_000 }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { truncated: boolean; stopped_by: string | null; nodes: unknown[] };
    expect(body.truncated).toBe(true);
    expect(body.stopped_by).toBe('max_nodes');
    expect(body.nodes).toHaveLength(2_000);
    const after = counters();
    expect(after.browseNexts - before.browseNexts).toBe(1);
    expect(after.browseReleases - before.browseReleases).toBe(1);
  });
});
