import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { clip, hostName } from '../http/guard.js';
import { errorReply, type Reply } from './http.js';

/**
 * Who may change the emulator through its own API (/_emulator/: faults, reset, tokens/expire,
 * clearing the journal) [A, emulator only]. A web page open on a developer's machine
 * could POST `text/plain` to http://127.0.0.1:8780/_emulator/reset (a no-cors fetch, a form, a
 * beacon need no preflight) and wipe the emulator under a running test.
 *
 * - Non-browser clients (curl, tests, benchmarks, scripts) send neither `Origin` nor
 *   `Sec-Fetch-Site`: unaffected.
 * - A browser sends `Origin` with every cross-origin POST and DELETE. Accepted: an origin listed
 *   with `--cors` (not `*`: that allows any site to read, not to write), or the emulator's own
 *   origin when it is addressed by IP address or `localhost` (a name could be re-pointed at this
 *   machine by DNS rebinding, which makes a hostile page "same origin").
 * - `Sec-Fetch-Site` other than same-origin or none is refused the same way.
 * - A body must be JSON (`Content-Type: application/json`), which a browser cannot send
 *   cross-origin without a preflight; a bodiless POST (`curl -X POST .../reset`) needs no type.
 */
export function refuseEmulatorWrite(req: IncomingMessage, method: string, corsOrigins: readonly string[]): Reply | null {
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return null;
  const origin = one(req.headers.origin);
  const listed = origin !== undefined && corsOrigins.includes(origin);
  if (origin !== undefined && !listed && !ownOrigin(origin, one(req.headers.host))) {
    return errorReply(403, 'cross_origin', `${method} from the web page of ${clip(origin)} is refused: the emulator's own API changes only for non-browser clients (curl, tests), its own page at an IP address or localhost, or an origin given with --cors`);
  }
  const site = one(req.headers['sec-fetch-site']);
  if (!listed && site !== undefined && site !== 'same-origin' && site !== 'none') {
    return errorReply(403, 'cross_origin', `${method} from a ${clip(site)} web page is refused: start the emulator with --cors ORIGIN to let that page change it`);
  }
  const length = Number(req.headers['content-length'] ?? 0);
  const hasBody = (Number.isFinite(length) && length > 0) || req.headers['transfer-encoding'] !== undefined;
  const type = one(req.headers['content-type']) ?? '';
  if (hasBody && !/^application\/json\s*(;|$)/i.test(type)) {
    return errorReply(415, 'unsupported_media_type', `send the body as JSON with "Content-Type: application/json" (got ${type ? `"${clip(type)}"` : 'none'})`);
  }
  return null;
}

/** `Origin` is http://<Host> and Host is an IP address or localhost (not a name DNS could rebind). */
function ownOrigin(origin: string, host: string | undefined): boolean {
  if (!host || origin.toLowerCase() !== `http://${host.toLowerCase()}`) return false;
  const name = hostName(host);
  return name === 'localhost' || isIP(name) !== 0;
}

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
