import { isIP } from 'node:net';

/**
 * A loopback address: `localhost`, `::1`, or a literal IPv4 address in 127.0.0.0/8 (also as
 * IPv4-mapped IPv6). A name such as `127.evil.example` is a name, not an address: not loopback.
 *
 * Asked by the local HTTP server's guard (http/guard.ts: who needs a token) and by the
 * configuration's warnings (config/load.ts: plain http:// or an open listener beyond this
 * machine); it lives in core because config sits below http.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIP(v4) === 4 && v4.startsWith('127.');
}
