import { describe, expect, it } from 'vitest';
import { SlidingWindowRateLimiter } from '../../src/emulator/rate-limit.js';
import { DEMO_API_KEY, basic, call, client, getToken, manualClock, withEmulator } from './helpers.js';

describe('rate limit (§7, §8)', () => {
  it('429 with the {error: {...}} envelope and Retry-After once the per-minute limit is used up', async () => {
    const em = await withEmulator({ rateLimitPerMinute: 5 });
    try {
      const c = client(em, DEMO_API_KEY);
      for (let i = 0; i < 5; i++) expect((await c.get('/machines')).status).toBe(200);
      const r = await c.get('/machines');
      expect(r.status).toBe(429);
      expect(r.body).toEqual({ error: { type: 'rate_limit', code: 'rate_limit_exceeded', message: expect.any(String), request_id: r.headers['service-request-id'] } });
      expect(r.body.error.request_id).toMatch(/^req_/);
      const retry = Number(r.headers['retry-after']);
      expect(Number.isInteger(retry)).toBe(true);
      expect(retry).toBeGreaterThanOrEqual(59);
      expect(retry).toBeLessThanOrEqual(60);
      // All endpoints together: the token endpoint and unknown paths are refused too.
      const t = await call(em.tokenUrl, { method: 'POST', headers: { authorization: basic('demo-gateway', 'demo-secret'), 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=client_credentials&audience=com.service.tracking' });
      expect(t.status).toBe(429);
      expect((await call(`${em.baseUrl}/nothing`)).status).toBe(429);
      // The inspection API is not limited.
      const stats = await call(`${em.inspectUrl}/stats`);
      expect(stats.status).toBe(200);
      expect(stats.body.rate_limited).toBe(3);
      expect(stats.body.requests['GET /machines']).toEqual({ '200': 5, '429': 1 });
      expect(stats.body.requests['POST /oauth2/token']).toEqual({ '429': 1 });
    } finally {
      await em.close();
    }
  });

  it('the token endpoint counts against the limit', async () => {
    const em = await withEmulator({ rateLimitPerMinute: 3 });
    try {
      await getToken(em);
      await getToken(em);
      const token = await getToken(em);
      const r = await client(em, token).get('/machines');
      expect(r.status).toBe(429);
    } finally {
      await em.close();
    }
  });

  it('the window slides exactly over 60 s, and Retry-After counts down to the oldest slot', async () => {
    const clock = manualClock();
    const em = await withEmulator({ rateLimitPerMinute: 3, clock });
    try {
      const c = client(em, DEMO_API_KEY);
      expect((await c.get('/machines')).status).toBe(200); // t = 0
      clock.advance(20_000);
      expect((await c.get('/machines')).status).toBe(200); // t = 20 s
      expect((await c.get('/machines')).status).toBe(200); // t = 20 s
      clock.advance(10_000); // t = 30 s
      let r = await c.get('/machines');
      expect(r.status).toBe(429);
      expect(r.headers['retry-after']).toBe('30');
      clock.advance(29_999); // t = 59.999 s: the first request is still inside the window
      r = await c.get('/machines');
      expect(r.status).toBe(429);
      expect(r.headers['retry-after']).toBe('1');
      clock.advance(1); // t = 60 s: exactly one slot is free
      expect((await c.get('/machines')).status).toBe(200);
      r = await c.get('/machines');
      expect(r.status).toBe(429);
      expect(r.headers['retry-after']).toBe('20'); // next slot frees at 80 s
      clock.advance(20_000);
      expect((await c.get('/machines')).status).toBe(200);
      expect((await c.get('/machines')).status).toBe(200);
      expect((await c.get('/machines')).status).toBe(429);
    } finally {
      await em.close();
    }
  });

  it('reset clears the windows; rate limit 0 disables the limit', async () => {
    const em = await withEmulator({ rateLimitPerMinute: 1 });
    try {
      const c = client(em, DEMO_API_KEY);
      expect((await c.get('/machines')).status).toBe(200);
      expect((await c.get('/machines')).status).toBe(429);
      expect((await call(`${em.inspectUrl}/reset`, { method: 'POST' })).status).toBe(200);
      expect((await c.get('/machines')).status).toBe(200);
    } finally {
      await em.close();
    }
    const free = await withEmulator({ rateLimitPerMinute: 0 });
    try {
      const c = client(free, DEMO_API_KEY);
      for (let i = 0; i < 50; i++) expect((await c.get('/machines')).status).toBe(200);
    } finally {
      await free.close();
    }
  });

  it('limiter unit: keys are separate and refused requests take no slot', () => {
    let t = 0;
    const l = new SlidingWindowRateLimiter(2, () => t);
    expect(l.take('a').ok).toBe(true);
    expect(l.take('a').ok).toBe(true);
    expect(l.take('b').ok).toBe(true);
    t = 1000;
    for (let i = 0; i < 10; i++) expect(l.take('a')).toEqual({ ok: false, retryAfterMs: 59_000 });
    t = 60_000;
    expect(l.take('a').ok).toBe(true);
    expect(l.take('a').ok).toBe(true);
    expect(l.take('a').ok).toBe(false);
  });

  it('neighbour_per_minute: another client on the same address spends that much of the limit, evenly', async () => {
    const clock = manualClock();
    let neighbour = 0;
    const limiter = new SlidingWindowRateLimiter(10, () => clock.monotonic(), 60_000, () => neighbour);
    // Without it, 10 requests a minute.
    for (let i = 0; i < 10; i++) expect(limiter.take('10.0.0.1').ok).toBe(true);
    expect(limiter.take('10.0.0.1').ok).toBe(false);
    // A neighbour of 6/min on every address: a new address paced at 4/min gets all of them, and so
    // does the neighbour, for minutes (10 a minute in all).
    neighbour = 6;
    for (let s = 0; s < 180; s += 1) {
      if (s % 15 === 0) expect(limiter.take('10.0.0.2').ok, `at ${s} s`).toBe(true);
      clock.advance(1_000);
    }
    // Played up to our last request (165 s): its requests at 0, 10, ..., 160 s.
    expect(limiter.neighbourAdmitted).toBe(17);
    expect(limiter.neighbourRefused).toBe(0);
    // Its window is full: more requests now are mostly refused.
    let extra = 0;
    for (let i = 0; i < 5; i++) if (limiter.take('10.0.0.2').ok) extra++;
    expect(extra).toBeLessThanOrEqual(2);
  });

  it('neighbour_per_minute over HTTP: the fault takes part of every address\'s window; the stats count it', async () => {
    const em = await withEmulator({ rateLimitPerMinute: 5 });
    try {
      em.setFaults({ neighbour_per_minute: 240 });
      const c = client(em, DEMO_API_KEY);
      // The neighbour takes a slot every 250 ms from the first request on: 5 fill in about a second.
      let ok = 0;
      for (let i = 0; i < 20; i++) {
        if ((await c.get('/machines')).status === 200) ok++;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(ok).toBeLessThan(5);
      const stats = (await call(`${em.inspectUrl}/stats`)).body;
      expect(stats.neighbour.admitted).toBeGreaterThan(0);
      expect(stats.neighbour.admitted + ok).toBeLessThanOrEqual(5);
    } finally {
      await em.close();
    }
  });
});
