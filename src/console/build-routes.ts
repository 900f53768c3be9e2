import { join } from 'node:path';
import type { GatewayConfig } from '../config/schema.js';
import type { Clock } from '../core/clock.js';
import { HttpError, type LocalHttpServer } from '../http/server.js';
import { planSection } from '../sources/modbus/plan.js';
import { deviceUrl } from '../sources/modbus/probe-cli.js';
import type { ConfiguredModbusDevice, ModbusDevicesResponse, SnippetResponse } from './api/build.js';
import { browseOpcua, browseSchema, parseBody, probeModbus, probeSchema, renderOpcuaSnippet, snippetSchema } from './build-tools.js';
import { sendJson } from './mapping-routes.js';
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

  // The body (the editor's text, up to 5 MB) is read, checked and merged on the console's text
  // worker (text-bodies.ts): the gateway's event loop only passes its bytes on.
  http.route('POST', '/console/api/config/merge', async (ctx) => sendJson(ctx.res, await deps.texts.runRequest('merge', await ctx.jsonBytes())), { name: 'console config merge' });

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
