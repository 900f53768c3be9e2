/** What the gateway answered: the status and the JSON body (null when there is none or it is not JSON). */
export interface Answer {
  status: number;
  ok: boolean;
  body: unknown;
  headers: Headers;
}

/** The error body of every gateway route (src/http/server.ts): `{error: {code, message, field}}`. */
export interface ErrorBody {
  error?: { code?: string; message?: string; field?: string };
}

/** The `error` of an answer's body, when it has one. */
export function errorOf(body: unknown): ErrorBody['error'] | undefined {
  return body !== null && typeof body === 'object' && 'error' in body ? (body as ErrorBody).error : undefined;
}

/**
 * One request to the gateway: same origin, never cached, the bearer token when there is one, a
 * JSON body for writes (the server's CSRF guard lets same-origin JSON through, src/http/guard.ts).
 * Answers every status; only a network failure (or `timeoutMs` without an answer) rejects.
 */
export async function send(path: string, o: { method?: string; body?: unknown; token?: string | null; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/json', ...o.headers };
  if (o.token) headers.authorization = `Bearer ${o.token}`;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  // A network that drops packets answers nothing, not an error: without a limit the request waits minutes.
  const signal = o.timeoutMs ? AbortSignal.timeout(o.timeoutMs) : undefined;
  const res = await fetch(path, { method: o.method ?? 'GET', headers, body: o.body === undefined ? undefined : JSON.stringify(o.body), cache: 'no-store', signal });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  return { status: res.status, ok: res.ok, body, headers: res.headers };
}
