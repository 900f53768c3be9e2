import { describe, expect, it } from 'vitest';
import { failureAction, toRequestError, type FailureKind } from '../../../src/sources/modbus/errors.js';

describe('what to do about a failed request (pure function of the failure)', () => {
  const table: Array<[FailureKind, number | undefined, { retry: boolean; silent: boolean; linkDown: boolean; splitBlock: boolean }]> = [
    ['timeout', undefined, { retry: true, silent: true, linkDown: false, splitBlock: false }],
    ['malformed', undefined, { retry: true, silent: false, linkDown: false, splitBlock: false }],
    ['connection', undefined, { retry: false, silent: false, linkDown: true, splitBlock: false }],
    ['exception', 1, { retry: false, silent: false, linkDown: false, splitBlock: false }],
    ['exception', 2, { retry: false, silent: false, linkDown: false, splitBlock: true }],
    ['exception', 3, { retry: false, silent: false, linkDown: false, splitBlock: false }],
    ['exception', 4, { retry: false, silent: false, linkDown: false, splitBlock: false }],
    ['exception', 5, { retry: true, silent: false, linkDown: false, splitBlock: false }],
    ['exception', 6, { retry: true, silent: false, linkDown: false, splitBlock: false }],
    ['exception', 8, { retry: false, silent: false, linkDown: false, splitBlock: false }],
    ['exception', 10, { retry: false, silent: false, linkDown: false, splitBlock: false }],
    ['exception', 11, { retry: true, silent: true, linkDown: false, splitBlock: false }],
    ['exception', 99, { retry: false, silent: false, linkDown: false, splitBlock: false }],
  ];
  for (const [kind, code, expected] of table) {
    it(`${kind}${code === undefined ? '' : ` ${code}`}`, () => expect(failureAction(kind, code)).toEqual(expected));
  }
});

describe('classifying what modbus-serial rejects with', () => {
  it('names exceptions (§7) with a stable code', () => {
    const names: Record<number, [string, string]> = {
      1: ['illegal function', 'MODBUS_ILLEGAL_FUNCTION'],
      2: ['illegal data address', 'MODBUS_ILLEGAL_DATA_ADDRESS'],
      3: ['illegal data value', 'MODBUS_ILLEGAL_DATA_VALUE'],
      4: ['server device failure', 'MODBUS_SERVER_DEVICE_FAILURE'],
      6: ['server device busy', 'MODBUS_SERVER_DEVICE_BUSY'],
      10: ['gateway path unavailable', 'MODBUS_GATEWAY_PATH_UNAVAILABLE'],
      11: ['gateway target device failed to respond', 'MODBUS_GATEWAY_TARGET_FAILED'],
    };
    for (const [code, [name, stable]] of Object.entries(names)) {
      const err = Object.assign(new Error(`Modbus exception ${code}`), { modbusCode: Number(code) });
      const e = toRequestError(err);
      expect(e.kind).toBe('exception');
      expect(e.exception?.name).toBe(name);
      expect(e.code).toBe(stable);
    }
  });

  it('tells timeouts, closed ports and damaged frames apart', () => {
    expect(toRequestError({ name: 'TransactionTimedOutError', message: 'Timed out', errno: 'ETIMEDOUT' }).kind).toBe('timeout');
    expect(toRequestError({ name: 'PortNotOpenError', message: 'Port Not Open', errno: 'ECONNREFUSED' }).kind).toBe('connection');
    expect(toRequestError(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })).kind).toBe('connection');
    expect(toRequestError(new Error('CRC error')).kind).toBe('malformed');
    expect(toRequestError(new Error('Data length error, expected 7 got 5')).code).toBe('MODBUS_BAD_RESPONSE');
  });
});
