import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { AUDIENCE } from '../../src/emulator/contract.js';
import { DEMO_CLIENT_ID, DEMO_CLIENT_SECRET } from '../../src/emulator/demo-fixture.js';
import { requestOnce } from '../helpers/http-once.js';
import { captureLines } from '../helpers/log.js';
import { openSockets, type Flood } from '../helpers/flood.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The emulator is a product too: one host's idle or half-sent connections cost that host, not the
 * gateways under test (127.0.0.1 here; attackers 127.0.0.2 and up).
 */

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

const HALF_REQUEST = 'POST /oauth2/token HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Never-Ends: ';

async function emulator(o: { maxConnections?: number; maxConnectionsPerClient?: number; headerTimeoutMs?: number }): Promise<{ em: EmulatorHandle; lines: Array<Record<string, unknown>> }> {
  const log = captureLines();
  const em = await startEmulator({ port: 0, logger: log.logger, ...o });
  cleanup.push(() => em.close());
  return { em, lines: log.lines };
}

/** A gateway asking for a token from 127.0.0.1, once: the status, or the connection error's code. */
function token(em: EmulatorHandle): Promise<number | string> {
  const body = new URLSearchParams({ grant_type: 'client_credentials', audience: AUDIENCE }).toString();
  const basic = Buffer.from(`${DEMO_CLIENT_ID}:${DEMO_CLIENT_SECRET}`).toString('base64');
  return requestOnce(em.tokenUrl, { method: 'POST', localAddress: '127.0.0.1', body, headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) } });
}

describe('emulator: connection limits per client address', () => {
  it('holds one address to maxConnectionsPerClient and, at maxConnections, sheds the address holding the most', async () => {
    const { em, lines } = await emulator({ maxConnections: 64, maxConnectionsPerClient: 16 });
    const one = await openSockets(100, { port: em.port, from: '127.0.0.2', first: HALF_REQUEST });
    cleanup.push(() => one.stop());
    await waitFor(() => one.open <= 16, { timeoutMs: 20_000, what: `one address held to 16 (open: ${one.open})` });
    expect(em.connectionsRefused().max_connections_per_client).toBeGreaterThanOrEqual(84);
    expect(lines.find((l) => l.reason === 'max_connections_per_client')).toMatchObject({ remote: '127.0.0.2' });

    const many: Flood[] = [];
    for (let i = 0; i < 4; i++) many.push(await openSockets(16, { port: em.port, from: `127.0.0.${3 + i}`, first: HALF_REQUEST }));
    cleanup.push(() => many.forEach((f) => f.stop()));
    // 16 + 64 half-sent connections, 64 allowed: the oldest of the addresses holding the most gave way.
    await waitFor(() => one.open + many.reduce((n, f) => n + f.open, 0) <= 64, { timeoutMs: 20_000, what: 'the total held to 64' });
    expect(await token(em)).toBe(200);
    expect(em.connectionsRefused().max_connections).toBeGreaterThanOrEqual(17);
  });

  it('closes a request whose headers never end at the header timeout (408)', async () => {
    const { em, lines } = await emulator({ headerTimeoutMs: 3_000 });
    const t0 = performance.now();
    const slow = await openSockets(2, { port: em.port, from: '127.0.0.8', first: HALF_REQUEST });
    cleanup.push(() => slow.stop());
    await waitFor(() => slow.closed === 2, { timeoutMs: 40_000, what: 'half-sent requests closed' });
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThan(2_500);
    // Checked every second (Node's default checks every 30 s a 60 s deadline: that was 60 to 90 s).
    expect(waited).toBeLessThan(20_000);
    expect(em.connectionsRefused().header_timeout).toBe(2);
    expect(lines.find((l) => l.reason === 'header_timeout')).toMatchObject({ remote: '127.0.0.8' });
    expect(await token(em)).toBe(200);
  }, 60_000);
});
