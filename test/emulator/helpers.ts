import { FormData, request } from 'undici';
import { startEmulator, type EmulatorHandle, type EmulatorOptions } from '../../src/emulator/index.js';
import { DEMO_API_KEY, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANISATION_ID } from '../../src/emulator/demo-fixture.js';

export { DEMO_API_KEY, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANISATION_ID };

export interface Res {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  text: string;
}

/** One HTTP call over the loopback; the body is parsed as JSON when it is JSON. */
export async function call(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string | Buffer | FormData | Uint8Array; json?: unknown } = {},
): Promise<Res> {
  const headers = { ...opts.headers };
  let body = opts.body;
  if (opts.json !== undefined) {
    body = JSON.stringify(opts.json);
    headers['content-type'] ??= 'application/json';
  }
  const r = await request(url, { method: (opts.method ?? (body === undefined ? 'GET' : 'POST')) as 'GET', headers, body: body as string });
  const text = await r.body.text();
  let parsed: unknown = text;
  try {
    parsed = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    // not JSON
  }
  return { status: r.statusCode, headers: r.headers, body: parsed, text };
}

export const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

export async function getToken(em: EmulatorHandle, id = DEMO_CLIENT_ID, secret = DEMO_CLIENT_SECRET): Promise<string> {
  const r = await call(em.tokenUrl, {
    method: 'POST',
    headers: { authorization: basic(id, secret), 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials&audience=com.service.tracking',
  });
  if (r.status !== 200) throw new Error(`token: ${r.status} ${r.text}`);
  return r.body.access_token as string;
}

/** A client bound to one emulator, credential and organisation. */
export function client(em: EmulatorHandle, credential: string, org: string = DEMO_ORGANISATION_ID) {
  const headers = (extra?: Record<string, string>) => ({ authorization: `Bearer ${credential}`, 'service-organisation-id': org, ...extra });
  return {
    get: (path: string) => call(em.baseUrl + path, { headers: headers() }),
    post: (path: string, json: unknown) => call(em.baseUrl + path, { method: 'POST', headers: headers(), json }),
    postRaw: (path: string, body: string | Buffer, contentType = 'application/json') => call(em.baseUrl + path, { method: 'POST', headers: headers({ 'content-type': contentType }), body }),
    upload: (path: string, form: FormData) => call(em.baseUrl + path, { method: 'POST', headers: headers(), body: form }),
    batch: (items: unknown[]) => call(em.baseUrl + '/machine-data/batch', { method: 'POST', headers: headers(), json: { items } }),
  };
}

export async function withEmulator(opts: EmulatorOptions = {}): Promise<EmulatorHandle> {
  return startEmulator({ port: 0, ...opts });
}

export const item = (machine_variable_id: string, timestamp: string, value: unknown) => ({ timestamp, machine_variable_id, value });

export function fileForm(content: string | Buffer, filename = 'items.json', field = 'file'): FormData {
  const form = new FormData();
  form.append(field, new Blob([content], { type: 'application/json' }), filename);
  return form;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A clock tests move by hand. */
export function manualClock(start = Date.parse('2026-03-01T00:00:00.000Z')) {
  let t = start;
  let m = 1_000_000;
  return {
    now: () => t,
    monotonic: () => m,
    advance(ms: number) {
      t += ms;
      m += ms;
    },
  };
}

/** Retries `check` (which throws until satisfied) every 10 ms for up to `timeoutMs`. */
export async function eventually(check: () => void, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      check();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await sleep(10);
  }
}
