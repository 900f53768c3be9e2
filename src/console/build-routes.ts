import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import { HttpError, type LocalHttpServer } from '../http/server.js';
import { z } from 'zod';
import { lineDiff } from '../config/text-diff.js';
import { machineVariableId } from '../sources/common-schema.js';
import type { MergeResponse, SnippetResponse } from './api/build.js';
import { browseOpcua, browseSchema, parseBody, probeModbus, probeSchema, renderOpcuaSnippet, snippetSchema } from './build-tools.js';
import { MergeError, mergeModbusRegisters, mergeOpcuaNodes, type MergeResult } from './config-merge.js';

export interface BuildRouteDeps {
  clock: Clock;
  /** The gateway's data directory: the browse keeps its certificates under console/pki there. */
  dataDir: string;
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
    let r: MergeResult;
    try {
      r = input.opcua ? mergeOpcuaNodes(input.yaml, input.opcua.server, input.opcua.nodes) : mergeModbusRegisters(input.yaml, input.modbus!.device, input.modbus!.registers);
    } catch (err) {
      if (err instanceof MergeError) throw new HttpError(400, 'bad_request', err.message, 'yaml');
      throw err;
    }
    const json: MergeResponse = { ...r, diff: r.yaml === input.yaml ? '' : lineDiff(input.yaml, r.yaml) };
    return { json };
  }, { name: 'console config merge' });

  http.route('POST', '/console/api/modbus/probe', async (ctx) => ({ json: await probeModbus(parseBody(probeSchema, await ctx.json()), deps.clock) }), { name: 'console modbus probe' });
}

const comment = z.string().max(200).optional();

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
        device: z
          .strictObject({
            name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, { error: 'letters, digits, _ . - (1 to 64)' }),
            transport: z.enum(['tcp', 'rtu', 'rtu_over_tcp']),
            host: z.string().min(1).max(253).optional(),
            port: z.number().int().min(1).max(65_535).optional(),
            path: z.string().min(1).max(4_096).optional(),
            unit_id: z.number().int().min(0).max(255),
          })
        .refine((d) => (d.transport === 'rtu' ? d.path !== undefined : d.host !== undefined), { error: 'a serial device (rtu) needs path, a network device (tcp, rtu_over_tcp) needs host' }),
        registers: z
          .array(
            z.strictObject({
              variable: machineVariableId,
              table: z.enum(['coil', 'discrete_input', 'holding', 'input']),
              address: z.number().int().min(0).max(65_535),
              type: z.string().max(16).optional(),
              byte_order: z.string().max(16).optional(),
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
