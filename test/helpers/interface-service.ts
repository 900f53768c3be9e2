import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A second, independent stand-in for the tracking service, written from the interface text alone
 * (§5, §7, §8), not from the emulator: no fault API, no
 * journal, and errors worded as §7 words them. A batch with any item it cannot take is refused
 * whole with the §7 standard body `{code: "bad_request", message: "invalid payload or parameters"}`,
 * which names neither the item nor the reason; the catalog is `GET /machine-variables` with the §8
 * pagination (`limit` at most 50). Enough of the interface for a gateway's sync path: the token
 * endpoint, the batch endpoint and the catalog; anything else is 404 `{code, message}`.
 */
export interface InterfaceService {
  baseUrl: string;
  authUrl: string;
  /** Values stored, by machine variable. */
  stored: Map<string, number>;
  /** Answers given, by "METHOD path status". */
  answers: Map<string, number>;
  close(): Promise<void>;
}

const BAD_REQUEST = { code: 'bad_request', message: 'invalid payload or parameters' };

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const p of req) parts.push(p as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

/** A batch's items when every one names a variable in `known`, a finite value and a timestamp; else null. */
function acceptedItems(text: string, known: ReadonlySet<string>): Array<{ machine_variable_id: string }> | null {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return null;
  }
  const items = (body as { items?: unknown } | null)?.items;
  if (!Array.isArray(items) || items.length < 1 || items.length > 200) return null;
  for (const it of items as Array<Record<string, unknown>>) {
    if (typeof it?.machine_variable_id !== 'string' || !known.has(it.machine_variable_id)) return null;
    if (typeof it.value !== 'number' || !Number.isFinite(it.value) || typeof it.timestamp !== 'string') return null;
  }
  return items as Array<{ machine_variable_id: string }>;
}

function catalogPage(url: URL, ids: readonly string[]): unknown {
  const limit = Math.min(50, Math.max(1, Number(url.searchParams.get('limit') ?? 10) || 10));
  const after = url.searchParams.get('starting_after');
  const from = after === null ? 0 : ids.indexOf(after) + 1;
  const page = ids.slice(from, from + limit);
  const hasMore = from + limit < ids.length;
  return { data: page.map((id) => ({ id, name: id })), pagination: { starting_after: after, limit, has_more: hasMore, next_cursor: hasMore ? page[page.length - 1] : null } };
}

/** Starts the service on an ephemeral port; it knows the machine variables `known`. */
export async function startInterfaceService(known: readonly string[]): Promise<InterfaceService> {
  const knownSet = new Set(known);
  const stored = new Map<string, number>();
  const answers = new Map<string, number>();
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://service');
    const text = await readBody(req);
    const answer = (status: number, body: unknown) => {
      const key = `${req.method} ${url.pathname} ${status}`;
      answers.set(key, (answers.get(key) ?? 0) + 1);
      reply(res, status, body);
    };
    if (req.method === 'POST' && url.pathname === '/oauth2/token') return answer(200, { access_token: 'interface-token', expires_in: 3600, token_type: 'bearer' });
    if (req.headers.authorization !== 'Bearer interface-token') return answer(401, { code: 'unauthorized', message: 'missing, invalid or expired token' });
    if (req.method === 'POST' && url.pathname === '/tracking/v1/machine-data/batch') {
      const items = acceptedItems(text, knownSet);
      if (!items) return answer(400, BAD_REQUEST);
      for (const it of items) stored.set(it.machine_variable_id, (stored.get(it.machine_variable_id) ?? 0) + 1);
      return answer(200, {});
    }
    if (req.method === 'GET' && url.pathname === '/tracking/v1/machine-variables') return answer(200, catalogPage(url, known));
    return answer(404, { code: 'not_found', message: 'not found' });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/tracking/v1`,
    authUrl: `http://127.0.0.1:${port}`,
    stored,
    answers,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
