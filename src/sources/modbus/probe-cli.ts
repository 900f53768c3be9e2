import { parseArgs } from 'node:util';
import { parseDurationMs } from '../../config/units.js';
import { systemClock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import { silentLogger } from '../../core/logger.js';
import { resolveAddress, TABLE_INFO, TABLES, type Table } from './address.js';
import { ModbusRequestError, toRequestError } from './errors.js';
import { endpointKey, type Endpoint } from './plan.js';
import { renderProbe } from './probe-format.js';

export const MODBUS_PROBE_HELP = `Usage: edge-gateway modbus-probe --device URL --address A [options]

Reads a range of registers (or bits) once and prints every candidate decoding: each type
(int16 ... float64) starting at each register, in all four byte orders (ABCD, DCBA, BADC,
CDAB), so you can pick the row and column that match the device's display.

  --device URL     tcp://HOST[:PORT]                 Modbus TCP (port 502 by default)
                   rtu-over-tcp://HOST:PORT          RTU frames through a serial device server
                   rtu:PATH[?baud=9600&parity=none&data_bits=8&stop_bits=1]
                                                     RTU on a serial port (defaults 19200, even, 8, 1)
  --unit N         unit id (slave address), default 1
  --table T        coil, discrete_input, holding (default) or input; not needed with a
                   Modicon address such as 40101
  --address A      first address: a number (see --base), 0x0064, or a Modicon reference 40101
  --count N        registers (or bits) to read, default 4 (max 125 registers, 2000 bits)
  --base 0|1       0: numbers are protocol addresses (default); 1: 1-based register numbers
  --timeout T      how long to wait for the answer, default 2s
  --help           this text

Exit status: 0 read and printed, 1 the device could not be reached or refused the read,
2 wrong arguments.

Example:
  edge-gateway modbus-probe --device tcp://192.168.10.21 --unit 1 --table holding --address 100 --count 4
`;

export interface ProbeIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

const defaultIo: ProbeIo = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
};

class UsageError extends Error {}

/** `edge-gateway modbus-probe ...`: `argv` are the arguments after the command name. Returns the exit status. */
export async function runModbusProbeCli(argv: string[], io: ProbeIo = defaultIo): Promise<number> {
  let args: ProbeArgs;
  try {
    const parsed = parseProbeArgs(argv);
    if (parsed === 'help') {
      io.out(MODBUS_PROBE_HELP);
      return 0;
    }
    args = parsed;
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.err(`modbus-probe: ${(err as Error).message}\nRun edge-gateway modbus-probe --help for the options.\n`);
      return 2;
    }
    throw err;
  }

  // Loaded only now: modbus-serial brings the serial port bindings, which --help does not need.
  const { ModbusLink } = await import('./link.js');
  // One attempt: the first connect failure ends the wait (a probe does not retry).
  const failed = new AbortController();
  const link = new ModbusLink(args.endpoint, {
    logger: silentLogger(),
    clock: systemClock,
    reconnect: { initialMs: 60_000, maxMs: 60_000 },
    connectTimeoutMs: args.timeoutMs,
    onConnectError: () => failed.abort(),
  });
  const key = endpointKey(args.endpoint);
  try {
    link.start();
    const connectDeadline = AbortSignal.any([failed.signal, AbortSignal.timeout(args.timeoutMs + 1_500)]);
    if (!(await link.waitUntilConnected(connectDeadline))) {
      io.err(`modbus-probe: could not connect to ${key}: ${link.status().last_error ?? 'no answer in time'}\n`);
      return 1;
    }
    const t0 = performance.now();
    let bytes: Buffer;
    try {
      bytes = (await link.read({ unitId: args.unitId, table: args.table, address: args.start, count: args.count, timeoutMs: args.timeoutMs })).bytes;
    } catch (raw) {
      const err = toRequestError(raw);
      io.err(`modbus-probe: ${describeFailure(err, args, key)}\n`);
      return 1;
    }
    const elapsedMs = Math.round(performance.now() - t0);
    io.out(renderProbe({ endpoint: key, unitId: args.unitId, table: args.table, start: args.start, count: args.count, base: args.base, elapsedMs, bytes }));
    return 0;
  } catch (err) {
    io.err(`modbus-probe: ${describeError(err)}\n`);
    return 1;
  } finally {
    await link.close();
  }
}

function describeFailure(err: ModbusRequestError, args: ProbeArgs, key: string): string {
  const what = `${args.count} ${TABLE_INFO[args.table].plural} from ${args.start + args.base}`;
  if (err.exception) return `unit ${args.unitId} at ${key} answered exception ${err.exception.code} (${err.exception.name}) to reading ${what}: ${err.exception.hint}`;
  if (err.kind === 'timeout') return `unit ${args.unitId} at ${key} did not answer reading ${what} within ${args.timeoutMs} ms (check the unit id, and for serial lines baud rate, parity and wiring)`;
  return `reading ${what} from unit ${args.unitId} at ${key} failed: ${err.message}`;
}

interface ProbeArgs {
  endpoint: Endpoint;
  unitId: number;
  table: Table;
  start: number;
  count: number;
  base: 0 | 1;
  timeoutMs: number;
}

function parseProbeArgs(argv: string[]): ProbeArgs | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      device: { type: 'string' },
      unit: { type: 'string' },
      table: { type: 'string' },
      address: { type: 'string' },
      count: { type: 'string' },
      base: { type: 'string' },
      timeout: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  if (!values.device) throw new UsageError('--device is required (tcp://HOST[:PORT], rtu-over-tcp://HOST:PORT or rtu:PATH?baud=...)');
  if (values.address === undefined) throw new UsageError('--address is required');
  const endpoint = parseDeviceUrl(values.device);
  const unitId = wholeNumber('--unit', values.unit ?? '1', 0, 255);
  const base = values.base === undefined ? 0 : values.base === '0' ? 0 : values.base === '1' ? 1 : undefined;
  if (base === undefined) throw new UsageError(`--base ${JSON.stringify(values.base)} must be 0 or 1`);
  // Without --table, 40101 is a Modicon reference (it names the table); with --table it is a plain number.
  const plain = /^\d+$/.test(values.address) && (values.table !== undefined || !/^[0134]\d{4,5}$/.test(values.address));
  const resolved = resolveAddress(plain ? Number(values.address) : values.address, base);
  if (!resolved.ok) throw new UsageError(`--address ${resolved.problem}`);
  let table: Table;
  if (values.table !== undefined) {
    if (!(TABLES as readonly string[]).includes(values.table)) throw new UsageError(`--table ${JSON.stringify(values.table)} is not one of ${TABLES.join(', ')}`);
    table = values.table as Table;
    if (resolved.table && resolved.table !== table) throw new UsageError(`--table ${table} contradicts --address ${values.address}, a Modicon reference to the ${TABLE_INFO[resolved.table].plural}`);
  } else {
    table = resolved.table ?? 'holding';
  }
  const max = TABLE_INFO[table].maxPerRequest;
  const count = wholeNumber('--count', values.count ?? (TABLE_INFO[table].bits ? '8' : '4'), 1, max);
  if (resolved.protocolAddress + count > 65_536) throw new UsageError(`--count ${count} from --address ${values.address} goes past the last address`);
  const timeoutMs = parseDurationMs(values.timeout ?? '2s');
  if (timeoutMs === undefined || timeoutMs < 10) throw new UsageError(`--timeout ${JSON.stringify(values.timeout)} is not a duration (500ms, 2s)`);
  // A Modicon reference is 1-based by definition; show the numbers the engineer typed.
  const shownBase = resolved.modicon ? 1 : base;
  return { endpoint, unitId, table, start: resolved.protocolAddress, count, base: shownBase, timeoutMs };
}

function wholeNumber(flag: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) throw new UsageError(`${flag} ${JSON.stringify(text)} must be a whole number from ${min} to ${max}`);
  return n;
}

/** The `--device` URL of an endpoint, the inverse of parseDeviceUrl (serial settings included). */
export function deviceUrl(e: Endpoint): string {
  if (e.transport === 'rtu') return `rtu:${e.path}?baud=${e.baudRate}&parity=${e.parity}&data_bits=${e.dataBits}&stop_bits=${e.stopBits}`;
  const host = e.host.includes(':') ? `[${e.host}]` : e.host;
  return `${e.transport === 'tcp' ? 'tcp' : 'rtu-over-tcp'}://${host}:${e.port}`;
}

/** `tcp://host:502`, `rtu-over-tcp://host:4001`, `rtu:/dev/ttyUSB0?baud=9600&parity=none`. */
export function parseDeviceUrl(text: string): Endpoint {
  const tcp = /^(tcp|rtu-over-tcp|rtu_over_tcp):\/\/(\[[^\]]+\]|[^:/]+)(?::(\d+))?\/?$/.exec(text);
  if (tcp) {
    const port = tcp[3] === undefined ? 502 : Number(tcp[3]);
    if (port < 1 || port > 65_535) throw new UsageError(`--device ${text}: port must be 1-65535`);
    const host = tcp[2].replace(/^\[|\]$/g, '');
    return { transport: tcp[1] === 'tcp' ? 'tcp' : 'rtu_over_tcp', host, port };
  }
  const rtu = /^rtu:([^?]+)(?:\?(.*))?$/.exec(text);
  if (rtu) {
    const params = new URLSearchParams(rtu[2] ?? '');
    const known = new Set(['baud', 'baud_rate', 'parity', 'data_bits', 'stop_bits']);
    for (const key of params.keys()) if (!known.has(key)) throw new UsageError(`--device ${text}: unknown serial setting "${key}" (baud, parity, data_bits, stop_bits)`);
    const baudRate = Number(params.get('baud') ?? params.get('baud_rate') ?? '19200');
    const parity = (params.get('parity') ?? 'even') as 'none' | 'even' | 'odd' | 'mark' | 'space';
    const dataBits = Number(params.get('data_bits') ?? '8');
    const stopBits = Number(params.get('stop_bits') ?? '1');
    if (!Number.isInteger(baudRate) || baudRate < 300 || baudRate > 921_600) throw new UsageError(`--device ${text}: baud must be 300-921600`);
    if (!['none', 'even', 'odd', 'mark', 'space'].includes(parity)) throw new UsageError(`--device ${text}: parity must be none, even, odd, mark or space`);
    if (dataBits !== 7 && dataBits !== 8) throw new UsageError(`--device ${text}: data_bits must be 7 or 8`);
    if (stopBits !== 1 && stopBits !== 2) throw new UsageError(`--device ${text}: stop_bits must be 1 or 2`);
    return { transport: 'rtu', path: rtu[1], baudRate, parity, dataBits, stopBits };
  }
  throw new UsageError(`--device ${JSON.stringify(text)} is not tcp://HOST[:PORT], rtu-over-tcp://HOST:PORT or rtu:PATH?baud=9600`);
}
