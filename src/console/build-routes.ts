import { join } from 'node:path';
import type { Clock } from '../core/clock.js';
import { HttpError, type LocalHttpServer } from '../http/server.js';
import type { SnippetResponse } from './api/build.js';
import { browseOpcua, browseSchema, parseBody, probeModbus, probeSchema, renderOpcuaSnippet, snippetSchema } from './build-tools.js';

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

  http.route('POST', '/console/api/modbus/probe', async (ctx) => ({ json: await probeModbus(parseBody(probeSchema, await ctx.json()), deps.clock) }), { name: 'console modbus probe' });
}
