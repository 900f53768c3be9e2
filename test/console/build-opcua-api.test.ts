import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../src/sim/opcua-server.js';
import { testConfigInput } from '../helpers/gateway.js';
import { captureLogger } from '../sources/opcua/helpers.js';

/**
 * POST /console/api/opcua/browse (issue 24 §3): the request's security and user settings, what it
 * refuses and how, without the password ever coming back. The browser side is
 * build-opcua.chromium.test.ts.
 */
const PASSWORD = 'Api-test-pw-5r7t';
let sim: OpcuaSimulator;
let emu: EmulatorHandle;
let gw: GatewayHandle;
let dir: string;
const log = captureLogger('debug');

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'build-opcua-api-'));
  sim = await startOpcuaSimulator({ securityModes: ['None'], users: [{ username: 'viewer', password: PASSWORD }], allowAnonymous: false, pkiDir: join(dir, 'sim-pki') });
  emu = await startEmulator({ port: 0 });
  gw = await startGateway(validateConfig(testConfigInput(emu, dir, { http: { enabled: true, port: 0 } })).config, { logger: log.logger });
}, 60_000);
afterAll(async () => {
  await gw?.close();
  await emu?.close();
  await sim?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function browse(body: Record<string, unknown>): Promise<{ status: number; text: string; json: Record<string, any> }> {
  const res = await fetch(`${gw.httpUrl}/console/api/opcua/browse`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ endpoint: sim.endpointUrl, ...body }) });
  const text = await res.text();
  return { status: res.status, text, json: JSON.parse(text) as Record<string, any> };
}

describe('POST /console/api/opcua/browse: security and user', () => {
  it('logs in with the user, lists one level by default, and answers the user name but never the password', async () => {
    const r = await browse({ user: 'viewer', password: PASSWORD });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ security_mode: 'None', security_policy: 'None', user: 'viewer', root: 'i=85' });
    const paths = (r.json.nodes as Array<{ path: string }>).map((n) => n.path);
    expect(paths).toContain('Press1');
    expect(paths.some((p) => p.includes('/'))).toBe(false);
    expect(r.text).not.toContain(PASSWORD);
  });

  it('a server that requires a user refuses an anonymous browse, and says so', async () => {
    const r = await browse({});
    expect(r.status).toBe(502);
    expect(r.json.error.message).toBe(`the OPC UA server ${sim.endpointUrl} does not accept anonymous sessions (its endpoint offers no anonymous user token policy): give a user name and password, or a user certificate.`);
  });

  it('refuses bad settings naming the field and never shows a password', async () => {
    const policy = await browse({ security_mode: 'Sign', security_policy: 'Basic128Rsa15' });
    expect(policy.status).toBe(400);
    expect(policy.json.error).toMatchObject({ field: 'security_policy' });
    expect(policy.json.error.message).toMatch(/^security_policy: "Basic128Rsa15" is not one of None, Basic256Sha256, Aes128_Sha256_RsaOaep, Aes256_Sha256_RsaPss/);
    const alone = await browse({ password: PASSWORD });
    expect(alone.status).toBe(400);
    expect(alone.json.error).toMatchObject({ field: 'user', message: 'password: given without a user name (user); leave both empty to log in anonymously' });
    const long = `${PASSWORD}${'x'.repeat(1_100)}`;
    const tooLong = await browse({ user: 'viewer', password: long });
    expect(tooLong.status).toBe(400);
    expect(tooLong.json.error.message).toBe('password: (value not shown) is longer than 1024 characters');
    const root = await browse({ user: 'viewer', password: PASSWORD, root: 'nsu=urn:nowhere;s=X' });
    expect(root.status).toBe(400);
    expect(root.json.error).toMatchObject({ field: 'root' });
    expect(root.json.error.message).toMatch(/^root: namespace URI "urn:nowhere" is not in the server's namespace array/);
    for (const r of [policy, alone, tooLong, root]) expect(r.text).not.toContain(PASSWORD);
    expect(log.text()).not.toContain(PASSWORD);
  });
});
