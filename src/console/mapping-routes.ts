import type { ServerResponse } from 'node:http';
import { Document } from 'yaml';
import type { GatewayConfig } from '../config/schema.js';
import { HttpError, type LocalHttpServer } from '../http/server.js';
import type { Catalog } from './api/build.js';
import { MergeError } from './config-merge.js';
import { mappingsCsvOf } from './mapping-csv.js';
import type { ConsoleTextWorker } from './text-worker.js';

export interface MappingRouteDeps {
  config: () => GatewayConfig;
  /** The configuration file's text, or null when the gateway runs without one. */
  configText: () => string | null;
  texts: ConsoleTextWorker;
  /** The console's copy of the organisation's catalog, when it has read it (the import flags ids it lacks and other units). */
  catalog: () => Catalog | null;
}

/**
 * Mappings as CSV (issue 24 §3, docs/mappings-csv.md), beside the configuration editor:
 *
 *   GET  /console/api/config/mappings.csv  every mapping of the configuration file (of the running
 *                                          configuration when there is no file), for a spreadsheet
 *   POST /console/api/config/mappings      the same for the editor's text, with the variables it
 *                                          feeds (the Build page flags one mapped twice)
 *   POST /console/api/config/import-csv    CSV rows merged into the editor's text (`update: true`
 *                                          also makes the changes to existing mappings it lists);
 *                                          nothing is written (Apply does that, after its diff)
 *
 * The sizes are bounded by http.max_body_bytes, by the schemas below and by the CSV reader
 * (mapping-import.ts: 20,000 rows, 64 columns, 4,096 characters a field). The texts are worked on
 * by the console's text worker, off the event loop (bench/console-mapping-csv.ts).
 */
export function registerMappingRoutes(http: LocalHttpServer, deps: MappingRouteDeps): void {
  http.route('GET', '/console/api/config/mappings.csv', async () => {
    const text = deps.configText();
    let csv: string;
    try {
      csv = text === null ? mappingsCsvOf(runningMappings(deps.config())).csv : (await deps.texts.run({ job: 'mappings-file', file: text })).csv;
    } catch (err) {
      if (err instanceof MergeError) throw new HttpError(409, 'config_unreadable', `the configuration file cannot be read as YAML: ${err.message}`);
      throw err;
    }
    // The byte order mark makes Excel read the file as UTF-8 (°C, µm in comments).
    return { text: `\uFEFF${csv}`, contentType: 'text/csv; charset=utf-8', headers: { 'content-disposition': 'attachment; filename="mappings.csv"' } };
  }, { name: 'console mappings csv', access: 'confidential' });

  // The bodies (the editor's text and a CSV file, up to 5 MB each) are read, checked and worked on
  // by the console's text worker (text-bodies.ts): the gateway's event loop only passes their bytes on.
  http.route('POST', '/console/api/config/mappings', async (ctx) => sendJson(ctx.res, await deps.texts.runRequest('mappings', await ctx.jsonBytes())), { name: 'console config mappings' });

  http.route('POST', '/console/api/config/import-csv', async (ctx) => {
    const bytes = await ctx.jsonBytes();
    sendJson(ctx.res, await deps.texts.runRequest('import', bytes, deps.catalog()));
  }, { name: 'console config import csv' });
}

/**
 * An answer the text worker serialized (api/build.ts MappingsResponse, ImportCsvResponse,
 * MergeResponse), written as it is, with the headers every answer of the local API carries.
 */
export function sendJson(res: ServerResponse, body: Uint8Array): void {
  res.statusCode = 200;
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('cache-control', 'no-store');
  res.setHeader('x-content-type-options', 'nosniff');
  res.end(body);
}

/** The mapping sections of the running configuration as a document (no comments: there is no file). */
function runningMappings(config: GatewayConfig): Document {
  const plain = JSON.parse(JSON.stringify({ opcua: { servers: config.opcua.servers.map((s) => ({ name: s.name, endpoint: s.endpoint, security_mode: s.security_mode, nodes: s.nodes })) }, modbus: config.modbus, mqtt: config.mqtt ? { connections: config.mqtt.connections.map((c) => ({ name: c.name, subscriptions: c.subscriptions })) } : undefined })) as unknown;
  return new Document(plain);
}
