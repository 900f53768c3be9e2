// The console's API client: requests with the optional bearer token, asked for once on a 401.
import type { SourceState } from '../../core/source.js';
import { errorOf, send } from '../../web/request.js';
import { askToken } from './token-prompt.js';
import { token } from './token.js';

/** An error answer of the gateway, with its `{error: {code, message, field}}` and the rest of its body. */
export class ApiError extends Error {
  readonly code: string | undefined;
  readonly field: string | undefined;

  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(errorOf(body)?.message ?? `HTTP ${status}`);
    this.code = errorOf(body)?.code;
    this.field = errorOf(body)?.field;
  }
}

/** The message of anything thrown. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * A request to the gateway, answered with its JSON body as `T` (the route's model in
 * src/console/api, or the model of the room that owns the route). A 401 asks for the token once
 * and tries again; any other error answer throws an ApiError. Writes send JSON.
 */
export async function api<T>(path: string, { method = 'GET', body }: { method?: string; body?: unknown } = {}): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const r = await send(path, { method, body, token: token.get() });
    if (r.status === 401 && attempt === 0) {
      token.set(null);
      const t = await askToken(errorOf(r.body)?.message ?? 'This gateway asks for its API token.');
      if (t) continue;
    }
    if (!r.ok) throw new ApiError(r.status, r.body);
    return r.body as T;
  }
}

/**
 * Natural order for names and ids: `mvr_gen_2` before `mvr_gen_10`, `Press 2`
 * before `Press 10`, case ignored.
 */
export const naturalCompare: (a: string, b: string) => number = new Intl.Collator('en', { numeric: true, sensitivity: 'base' }).compare;

/** The pill colour of a source state. */
export const STATE_CLASS: Record<SourceState, 'ok' | 'warn' | 'bad'> = { connected: 'ok', degraded: 'warn', connecting: 'warn', starting: 'warn', disconnected: 'bad', stopped: 'bad' };
