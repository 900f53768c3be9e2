/**
 * The four Modbus data tables and how people write addresses for them.
 *
 * On the wire every table is addressed 0..65535 (Modbus Application Protocol v1.1b3 §4.4:
 * "data items are addressed from 0 to 65535"). Device manuals use three other conventions, all
 * supported here:
 *
 * - 1-based numbers ("register 1" is protocol address 0): `address_base: 1`.
 * - Modicon references: a leading digit names the table and the rest is 1-based:
 *   0xxxx coils, 1xxxx discrete inputs, 3xxxx input registers, 4xxxx holding registers, with
 *   five digits (40001 = holding register at protocol address 0, up to 49999) or six digits
 *   (400001, up to 465536). They must be written as strings ("40001") because 40001 is also a
 *   valid plain address.
 * - Hexadecimal ("0x0064"), read with the same base as a decimal number.
 */

export const TABLES = ['coil', 'discrete_input', 'holding', 'input'] as const;
export type Table = (typeof TABLES)[number];

export interface TableInfo {
  /** Read function code (§6.1–§6.4). */
  functionCode: 1 | 2 | 3 | 4;
  /** Single bits (coils, discrete inputs) or 16-bit registers. */
  bits: boolean;
  /** Largest quantity one read may ask for: 2,000 bits (§6.1, §6.2) or 125 registers (§6.3, §6.4). */
  maxPerRequest: number;
  /** Modicon reference prefix digit. */
  modiconDigit: '0' | '1' | '3' | '4';
  /** Words for messages. */
  singular: string;
  plural: string;
}

export const TABLE_INFO: Record<Table, TableInfo> = {
  coil: { functionCode: 1, bits: true, maxPerRequest: 2000, modiconDigit: '0', singular: 'coil', plural: 'coils' },
  discrete_input: { functionCode: 2, bits: true, maxPerRequest: 2000, modiconDigit: '1', singular: 'discrete input', plural: 'discrete inputs' },
  holding: { functionCode: 3, bits: false, maxPerRequest: 125, modiconDigit: '4', singular: 'holding register', plural: 'holding registers' },
  input: { functionCode: 4, bits: false, maxPerRequest: 125, modiconDigit: '3', singular: 'input register', plural: 'input registers' },
};

const TABLE_BY_DIGIT: Record<string, Table> = { '0': 'coil', '1': 'discrete_input', '3': 'input', '4': 'holding' };

export type AddressBase = 0 | 1;

export type ResolvedAddress = { ok: true; table: Table | undefined; protocolAddress: number; modicon: boolean } | { ok: false; problem: string };

/**
 * Resolves a configured address to a protocol address (0..65535) and, for Modicon references, the
 * table it names.
 */
export function resolveAddress(address: number | string, base: AddressBase): ResolvedAddress {
  if (typeof address === 'number') return fromNumber(address, base, String(address));
  const text = address.trim();
  if (/^0x[0-9a-f]{1,5}$/i.test(text)) return fromNumber(parseInt(text.slice(2), 16), base, JSON.stringify(address));
  const modicon = /^([0134])(\d{4,5})$/.exec(text);
  if (modicon) {
    const table = TABLE_BY_DIGIT[modicon[1]];
    const number = Number(modicon[2]);
    const max = modicon[2].length === 4 ? 9999 : 65536;
    if (number < 1 || number > max) {
      return { ok: false, problem: `${JSON.stringify(address)} is not a Modicon reference: the number after the table digit must be 1-${max}` };
    }
    return { ok: true, table, protocolAddress: number - 1, modicon: true };
  }
  if (/^\d+$/.test(text)) return fromNumber(Number(text), base, JSON.stringify(address));
  return {
    ok: false,
    problem: `${JSON.stringify(address)} is not an address (use a number, hex like "0x0064", or a Modicon reference like "40001")`,
  };
}

function fromNumber(n: number, base: AddressBase, shown: string): ResolvedAddress {
  if (!Number.isInteger(n)) return { ok: false, problem: `${shown} is not a whole number` };
  const min = base;
  const max = 65535 + base;
  if (n < min || n > max) {
    return { ok: false, problem: `${shown} is outside ${min}-${max} (address_base is ${base})` };
  }
  return { ok: true, table: undefined, protocolAddress: n - base, modicon: false };
}

/** A range as the user configured it, for messages: protocol addresses, plus the 1-based numbers when that is the base. */
export function describeRange(table: Table, start: number, count: number, base: AddressBase): string {
  const info = TABLE_INFO[table];
  const words = count === 1 ? info.singular : info.plural;
  const span = (from: number) => (count === 1 ? `${from}` : `${from}-${from + count - 1}`);
  // Numbers as the engineer configured them first; the protocol address in brackets when they differ.
  if (base === 1) return `${words} ${span(start + 1)} (protocol address${count === 1 ? '' : 'es'} ${span(start)})`;
  return `${words} ${span(start)}`;
}
