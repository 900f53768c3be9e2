import { z } from 'zod';
import { describeError } from '../core/errors.js';
import { HttpError } from '../http/server.js';
import { machineVariableId, sourceName, unitSetting } from '../sources/common-schema.js';
import { BYTE_ORDERS, DATA_TYPES } from '../sources/modbus/decode.js';
import { parseDeviceUrl } from '../sources/modbus/probe-cli.js';
import { parseBody } from './build-tools.js';
import type { ModbusDeviceAddition } from './config-merge.js';
import type { MergeJob } from './text-jobs.js';

/**
 * The bodies of the console's routes that take a configuration text or a CSV file (up to 5 MB
 * each): read and checked on the console's text worker (text-jobs.ts `request`), so that the
 * gateway's event loop does not parse them either.
 */

/** POST /console/api/config/mappings (api/build.ts MappingsRequest). */
export const mappingsSchema = z.strictObject({ yaml: z.string().max(5_000_000) });

/** POST /console/api/config/import-csv (api/build.ts ImportCsvRequest). */
export const importSchema = z.strictObject({ yaml: z.string().max(5_000_000), csv: z.string().max(5_000_000), update: z.boolean().optional() });

/** A JSON body's bytes as the server's json() reads them, then checked by `schema` (400 naming the field). */
export function bodyOf<T extends z.ZodType>(bytes: Uint8Array, schema: T): z.output<T> {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  if (text.trim() === '') throw new HttpError(400, 'bad_request', 'the body is empty; send a JSON object');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new HttpError(400, 'bad_request', `the body is not valid JSON: ${describeError(err)}`);
  }
  return parseBody(schema, body);
}

/** "Add to configuration": the body as the merge takes it, its Modbus device resolved. */
export function mergeJobOf(input: z.output<typeof mergeSchema>): MergeJob {
  return { yaml: input.yaml, opcua: input.opcua, modbus: input.modbus ? { device: deviceAddition(input.modbus.device), registers: input.modbus.registers } : undefined };
}

const comment = z.string().max(200).optional();

/** The merge's device: as given, or from the probe's device URL (rtu: with its serial settings). */
function deviceAddition(d: z.output<typeof mergeDevice>): ModbusDeviceAddition {
  if (!('url' in d)) return d;
  let e;
  try {
    e = parseDeviceUrl(d.url);
  } catch (err) {
    throw new HttpError(400, 'bad_request', `modbus.device.url: ${describeError(err).replace(/^--device /, '')}`, 'modbus.device.url');
  }
  if (e.transport === 'rtu') return { name: d.name, transport: 'rtu', path: e.path, serial: { baud_rate: e.baudRate, parity: e.parity, data_bits: e.dataBits as 7 | 8, stop_bits: e.stopBits as 1 | 2 }, unit_id: d.unit_id };
  return { name: d.name, transport: e.transport, host: e.host, port: e.port, unit_id: d.unit_id };
}

const mergeDevice = z.union([
  z
    .strictObject({
      name: sourceName,
      transport: z.enum(['tcp', 'rtu', 'rtu_over_tcp']),
      host: z.string().min(1).max(253).optional(),
      port: z.number().int().min(1).max(65_535).optional(),
      path: z.string().min(1).max(4_096).optional(),
      unit_id: z.number().int().min(0).max(255),
    })
    .refine((d) => (d.transport === 'rtu' ? d.path !== undefined : d.host !== undefined), { error: 'a serial device (rtu) needs path, a network device (tcp, rtu_over_tcp) needs host' }),
  z.strictObject({ name: sourceName, url: z.string().min(1).max(4_096), unit_id: z.number().int().min(0).max(255) }),
]);

/** POST /console/api/config/merge (api/build.ts MergeRequest): exactly one of opcua or modbus. */
export const mergeSchema = z
  .strictObject({
    yaml: z.string().max(5_000_000),
    opcua: z
      .strictObject({
        server: z.strictObject({
          name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, { error: 'letters, digits, _ . - (1 to 64)' }),
          endpoint: z.string().regex(/^opc\.tcp:\/\//, { error: 'must start with opc.tcp://' }),
          security_mode: z.enum(['None', 'Sign', 'SignAndEncrypt']).optional(),
          security_policy: z.string().max(64).optional(),
          user: z.string().min(1).max(128).optional(),
        }),
        nodes: z.array(z.strictObject({ node_id: z.string().min(1).max(4_096), variable: machineVariableId, unit: unitSetting, comment })).min(1).max(20_000),
      })
      .optional(),
    modbus: z
      .strictObject({
        device: mergeDevice,
        registers: z
          .array(
            z.strictObject({
              variable: machineVariableId,
              table: z.enum(['coil', 'discrete_input', 'holding', 'input']),
              address: z.number().int().min(0).max(65_535),
              type: z.enum(DATA_TYPES).optional(),
              bit: z.number().int().min(0).max(15).optional(),
              byte_order: z.enum(BYTE_ORDERS).optional(),
              scale: z.number().finite().optional(),
              offset: z.number().finite().optional(),
              unit: unitSetting,
              comment,
            }),
          )
          .min(1)
          .max(20_000),
      })
      .optional(),
  })
  .refine((b) => (b.opcua === undefined) !== (b.modbus === undefined), { error: 'give exactly one of opcua (nodes of a server) or modbus (registers of a device)', path: ['opcua'] });
