import { isIP } from 'node:net';

/**
 * The key a listener counts a peer's connections under: its IPv4 address (also when it arrives
 * IPv4-mapped on a dual-stack socket, `::ffff:10.0.0.5`), or for IPv6 its /64 network. One host is
 * given a whole /64 by the usual IPv6 assignment (RFC 4291 §2.5.1 interface ids, SLAAC), so per
 * address limits keyed on the full IPv6 address would be 2^64 limits for one attacker.
 */
export function remoteKey(address: string | undefined): string {
  if (!address) return 'unknown';
  const a = address.toLowerCase();
  if (a.startsWith('::ffff:') && isIP(a.slice(7)) === 4) return a.slice(7);
  if (isIP(a) !== 6) return a;
  return `${ipv6Groups(a).slice(0, 4).join(':')}::/64`;
}

/** The eight groups of an IPv6 address, without leading zeros (`::` expanded, zone dropped). */
function ipv6Groups(address: string): string[] {
  const [plain] = address.split('%');
  let text = plain;
  // A trailing dotted IPv4 part (`::ffff:1.2.3.4` handled above, `64:ff9b::1.2.3.4` here) is two groups.
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [b0, b1, b2, b3] = v4.slice(1).map(Number);
    text = `${text.slice(0, v4.index)}${((b0 << 8) | b1).toString(16)}:${((b2 << 8) | b3).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, null];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const fill = tail === null ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...fill, ...right].map((g) => (g.replace(/^0+/, '') || '0'));
}
