import { randomBytes } from 'node:crypto';

/**
 * Service-assigned ids are TypeIDs: a type prefix, an underscore, then an opaque suffix (§2.1).
 * The suffix here is 26 lowercase Crockford base32 characters of randomness, like a TypeID.
 */
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

function base32(bytes: Buffer, length: number): string {
  let out = '';
  let bits = 0;
  let acc = 0;
  for (let i = 0; i < bytes.length && out.length < length; i++) {
    acc = (acc << 8) | bytes[i];
    bits += 8;
    while (bits >= 5 && out.length < length) {
      bits -= 5;
      out += ALPHABET[(acc >>> bits) & 31];
    }
    acc &= (1 << bits) - 1;
  }
  return out;
}

/** `prefix_` + 26 random base32 characters: `job_`, `mda_`, `req_` (CONTRACT.md: `req_...`). */
export function newId(prefix: string): string {
  return `${prefix}_${base32(randomBytes(17), 26)}`;
}

/** Opaque bearer token (§5.3 leaves the format to the service). */
export function newToken(): string {
  return `tok_${randomBytes(24).toString('base64url')}`;
}
