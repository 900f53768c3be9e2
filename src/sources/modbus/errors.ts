import { GatewayError } from '../../core/errors.js';

/**
 * Modbus exception responses (Modbus Application Protocol v1.1b3 §7, "MODBUS Exception Responses")
 * with the name used in logs, the metric label and the stable error code, plus a hint for the
 * engineer reading the log.
 */
export interface ExceptionInfo {
  code: number;
  /** Words for people: "illegal data address". */
  name: string;
  /** Metric label and part of the error code: `illegal_data_address`. */
  label: string;
  hint: string;
}

export const MODBUS_EXCEPTIONS: Record<number, ExceptionInfo> = {
  1: { code: 1, name: 'illegal function', label: 'illegal_function', hint: 'the device does not support this read; check the table (holding vs input, coil vs discrete_input)' },
  2: { code: 2, name: 'illegal data address', label: 'illegal_data_address', hint: 'the device has no such address; check address_base (0 or 1), the table and the register map' },
  3: { code: 3, name: 'illegal data value', label: 'illegal_data_value', hint: 'the device refuses this quantity; lower max_registers_per_request or max_bits_per_request' },
  4: { code: 4, name: 'server device failure', label: 'server_device_failure', hint: 'the device reports an internal error while reading' },
  5: { code: 5, name: 'acknowledge', label: 'acknowledge', hint: 'the device accepted the request but needs longer; it is retried' },
  6: { code: 6, name: 'server device busy', label: 'server_device_busy', hint: 'the device is busy; the request is retried' },
  8: { code: 8, name: 'memory parity error', label: 'memory_parity_error', hint: 'the device found a parity error in its memory' },
  10: { code: 10, name: 'gateway path unavailable', label: 'gateway_path_unavailable', hint: 'the gateway has no route to this unit id; check unit_id and the gateway configuration' },
  11: { code: 11, name: 'gateway target device failed to respond', label: 'gateway_target_failed', hint: 'the device behind the gateway did not answer; check its power, wiring and unit_id' },
};

export function exceptionInfo(code: number): ExceptionInfo {
  return MODBUS_EXCEPTIONS[code] ?? { code, name: `exception ${code}`, label: `exception_${code}`, hint: 'not defined by the Modbus specification' };
}

/** Kinds of request failure the poller tells apart. */
export type FailureKind = 'exception' | 'timeout' | 'connection' | 'malformed';

/** An error of one request, with a stable code. */
export class ModbusRequestError extends GatewayError {
  readonly kind: FailureKind;
  readonly exception?: ExceptionInfo;

  constructor(kind: FailureKind, code: string, message: string, options: { cause?: unknown; exception?: ExceptionInfo } = {}) {
    super(code, message, { cause: options.cause });
    this.name = 'ModbusRequestError';
    this.kind = kind;
    if (options.exception) this.exception = options.exception;
  }
}

/**
 * Turns whatever modbus-serial (or our own guards) rejected with into a `ModbusRequestError`.
 * modbus-serial sets `modbusCode` on exception responses, `errno: 'ETIMEDOUT'` on timeouts and
 * `errno: 'ECONNREFUSED'` with "Port Not Open" when the port is closed.
 */
export function toRequestError(err: unknown): ModbusRequestError {
  if (err instanceof ModbusRequestError) return err;
  const e = (err ?? {}) as { modbusCode?: unknown; errno?: unknown; code?: unknown; message?: unknown };
  const message = typeof e.message === 'string' ? e.message : String(err);
  if (typeof e.modbusCode === 'number') {
    const info = exceptionInfo(e.modbusCode);
    return new ModbusRequestError('exception', `MODBUS_${info.label.toUpperCase()}`, `exception ${info.code} (${info.name})`, { cause: err, exception: info });
  }
  if (e.errno === 'ETIMEDOUT' || /timed out/i.test(message)) {
    return new ModbusRequestError('timeout', 'MODBUS_TIMEOUT', 'no response before the timeout', { cause: err });
  }
  if (e.errno === 'ECONNREFUSED' || /port not open/i.test(message) || ['ECONNRESET', 'EPIPE', 'ENOENT', 'EIO', 'ECONNREFUSED'].includes(String(e.code))) {
    return new ModbusRequestError('connection', 'MODBUS_NOT_CONNECTED', `connection not usable (${message})`, { cause: err });
  }
  // CRC errors, "Data length error", "Unexpected data error": a damaged or foreign frame.
  return new ModbusRequestError('malformed', 'MODBUS_BAD_RESPONSE', `unusable response (${message})`, { cause: err });
}

/** What to do about a failed request. A pure function of the failure, covered by a table test. */
export interface FailureAction {
  /** Send the same request again now (up to the device's `retries`). */
  retry: boolean;
  /** The device gave no answer at all: counts towards taking it offline with backoff. */
  silent: boolean;
  /** The connection itself is gone: wait for the link to reconnect. */
  linkDown: boolean;
  /** An illegal-address answer for a multi-value block: read its values one by one to isolate the bad one. */
  splitBlock: boolean;
}

export function failureAction(kind: FailureKind, exceptionCode?: number): FailureAction {
  switch (kind) {
    case 'timeout':
      return { retry: true, silent: true, linkDown: false, splitBlock: false };
    case 'malformed':
      return { retry: true, silent: false, linkDown: false, splitBlock: false };
    case 'connection':
      return { retry: false, silent: false, linkDown: true, splitBlock: false };
    case 'exception':
      switch (exceptionCode) {
        // §7: 05 and 06 ask the client to retry later.
        case 5:
        case 6:
          return { retry: true, silent: false, linkDown: false, splitBlock: false };
        // §7: 0B means the target behind a gateway did not answer: same as silence from that device.
        case 11:
          return { retry: true, silent: true, linkDown: false, splitBlock: false };
        case 2:
          return { retry: false, silent: false, linkDown: false, splitBlock: true };
        default:
          return { retry: false, silent: false, linkDown: false, splitBlock: false };
      }
  }
}
