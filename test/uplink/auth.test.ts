import { Agent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { Secret } from '../../src/config/secrets.js';
import { systemClock } from '../../src/core/clock.js';
import { createMetrics } from '../../src/core/metrics.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { ClientCredentialsAuth, TokenError } from '../../src/uplink/auth.js';
import { RequestBudget } from '../../src/uplink/budget.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** A monotonic clock the test moves by hand (token renewal runs on it), wall time real. */
function manualClock() {
  let mono = 0;
  return { clock: { now: () => Date.now(), monotonic: () => mono }, advance: (ms: number) => void (mono += ms) };
}

async function setup(ttl = 3_600, secret = 'demo-secret', clock = systemClock) {
  const emu: EmulatorHandle = await startEmulator({ port: 0, tokenTtlSeconds: ttl });
  const dispatcher = new Agent();
  cleanup.push(async () => {
    await dispatcher.close();
    await emu.close();
  });
  const metrics = createMetrics();
  const budget = new RequestBudget(6_000, systemClock, metrics);
  const auth = new ClientCredentialsAuth({ authUrl: emu.authUrl, clientId: 'demo-gateway', clientSecret: new Secret(secret, 'test'), audience: 'com.service.tracking', budget, clock, dispatcher, metrics, timeoutMs: 5_000 });
  return { emu, auth, metrics, budget };
}

const tokenCalls = (emu: EmulatorHandle) => Object.values(emu.stats().requests['POST /oauth2/token'] ?? {}).reduce((a, b) => a + b, 0);

describe('client-credentials token lifecycle (§5.2-5.4)', () => {
  it('concurrent callers share one token request, and the token is cached', async () => {
    const { emu, auth, budget } = await setup();
    const tokens = await Promise.all(Array.from({ length: 25 }, () => auth.bearer()));
    expect(new Set(tokens).size).toBe(1);
    expect(tokenCalls(emu)).toBe(1);
    await auth.bearer();
    expect(tokenCalls(emu)).toBe(1);
    // The token call took its slot from the shared budget.
    expect(budget.totalGranted).toBe(1);
  });

  it('renews before expiry: at 80 % of the lifetime, not before', async () => {
    const time = manualClock();
    const { emu, auth } = await setup(3_600, 'demo-secret', time.clock);
    const first = await auth.bearer();
    time.advance(0.8 * 3_600_000 - 1_000);
    expect(await auth.bearer()).toBe(first);
    expect(tokenCalls(emu)).toBe(1);
    time.advance(2_000); // past 80 % of the hour, well before its end
    const second = await auth.bearer();
    expect(second).not.toBe(first);
    expect(tokenCalls(emu)).toBe(2);
  });

  it('forgets a token the service rejected and fetches another', async () => {
    const { emu, auth } = await setup();
    const first = await auth.bearer();
    auth.rejected(first);
    const second = await auth.bearer();
    expect(second).not.toBe(first);
    expect(tokenCalls(emu)).toBe(2);
  });

  it('a refused secret is a TOKEN_REJECTED error that does not contain the secret', async () => {
    const { auth } = await setup(3_600, 'not-the-secret-xyz');
    const err = await auth.bearer().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TokenError);
    expect((err as TokenError).code).toBe('TOKEN_REJECTED');
    expect((err as TokenError).message).toMatch(/client_id \(demo-gateway\)/);
    expect(JSON.stringify(err) + String(err) + (err as Error).stack).not.toContain('not-the-secret-xyz');
  });

  it('an unreachable token endpoint is TOKEN_UNAVAILABLE (retried, not a credentials problem)', async () => {
    const { emu, auth } = await setup();
    await emu.close();
    const err = await auth.bearer().catch((e: unknown) => e);
    expect((err as TokenError).code).toBe('TOKEN_UNAVAILABLE');
  });
});
