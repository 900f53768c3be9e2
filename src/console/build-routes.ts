import { join } from 'node:path';
import type { GatewayConfig } from '../config/schema.js';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { HttpError, type LocalHttpServer } from '../http/server.js';
import { z } from 'zod';
import { machineVariableId, sourceName } from '../sources/common-schema.js';
import { BYTE_ORDERS, DATA_TYPES } from '../sources/modbus/decode.js';
import { planSection } from '../sources/modbus/plan.js';
import { deviceUrl, parseDeviceUrl } from '../sources/modbus/probe-cli.js';
import type { ConfiguredModbusDevice, MergeResponse, ModbusDevicesResponse, SnippetResponse } from './api/build.js';
import { browseOpcua, browseSchema, parseBody, probeModbus, probeSchema, renderOpcuaSnippet, snippetSchema } from './build-tools.js';
import { MergeError, type ModbusDeviceAddition } from './config-merge.js';
import type { ConsoleTextWorker } from './text-worker.js';

export interface BuildRouteDeps {
  clock: Clock;
  /** The gateway's data directory: the browse keeps its certificates under console/pki there. */
  dataDir: string;
  /** The running configuration: the probe offers its Modbus devices. */
  config: () => GatewayConfig;
  texts: ConsoleTextWorker;
}

/** One task at a time: a second one while the first runs is refused (409), never queued. */
export class OneAtATime {
  private running = false;

  constructor(private readonly busyMessage: string) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running) throw new HttpError(409, 'busy', this.busyMessage);
    this.running = true;
    try {
      return await task();
    } finally {
      this.running = false;
    }
  }
}

/**
 * The Build page's tools (Build the config → OPC UA, Modbus probe): browse a server, write the
 * `opcua:` snippet of the ticked nodes, probe a register range. The page's catalog
 * (catalog.ts) and configuration editor (config-routes.ts) register their own routes.
 */
export function registerBuildRoutes(http: LocalHttpServer, deps: BuildRouteDeps): void {
  const browsing = new OneAtATime('a browse is already running; wait for it');
  http.route('POST', '/console/api/opcua/browse', async (ctx) => {
    const input = parseBody(browseSchema, await ctx.json());
    return { json: await browsing.run(() => browseOpcua(input, join(deps.dataDir, 'console', 'pki'))) };
  }, { name: 'console opcua browse' });

  http.route('POST', '/console/api/opcua/snippet', async (ctx) => {
    const input = parseBody(snippetSchema, await ctx.json());
    const json: SnippetResponse = { yaml: renderOpcuaSnippet(input) };
    return { json };
  }, { name: 'console opcua snippet' });

  http.route('POST', '/console/api/config/merge', async (ctx) => {
    const input = parseBody(mergeSchema, await ctx.json());
    try {
      // On the console's text worker (the text may be MB): the gateway's event loop is not held.
      const request = { yaml: input.yaml, opcua: input.opcua, modbus: input.modbus ? { device: deviceAddition(input.modbus.device), registers: input.modbus.registers } : undefined };
      const json: MergeResponse = await deps.texts.run({ job: 'merge', request });
      return { json };
    } catch (err) {
      if (err instanceof MergeError) throw new HttpError(400, 'bad_request', err.message, 'yaml');
      throw err;
    }
  }, { name: 'console config merge' });

  // The probe's list of configured devices: the running configuration's, as the source plans them.
  http.route('GET', '/console/api/modbus/devices', () => {
    const section = deps.config().modbus;
    const devices: ConfiguredModbusDevice[] = section
      ? planSection(section).devices.map((d) => ({
          name: d.name,
          url: deviceUrl(d.endpoint),
          transport: d.endpoint.transport,
          unit_id: d.unitId,
          address_base: d.addressBase,
          byte_order: section.devices[d.index].byte_order,
          registers: d.values.map((v) => ({ variable: v.variable, table: v.table, address: v.address, count: v.count, type: v.type, ...(v.type === 'bit' ? { bit: v.bit } : {}) })),
        }))
      : [];
    return { json: { devices } satisfies ModbusDevicesResponse };
  }, { name: 'console modbus devices', access: 'confidential' });

  http.route('POST', '/console/api/modbus/probe', async (ctx) => ({ json: await probeModbus(parseBody(probeSchema, await ctx.json()), deps.clock) }), { name: 'console modbus probe' });
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
const mergeSchema = z
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
        nodes: z.array(z.strictObject({ node_id: z.string().min(1).max(4_096), variable: machineVariableId, comment })).min(1).max(20_000),
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
              comment,
            }),
          )
          .min(1)
          .max(20_000),
      })
      .optional(),
  })
  .refine((b) => (b.opcua === undefined) !== (b.modbus === undefined), { error: 'give exactly one of opcua (nodes of a server) or modbus (registers of a device)', path: ['opcua'] });
