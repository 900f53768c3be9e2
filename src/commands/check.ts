import { loadConfigFile } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { systemClock } from '../core/clock.js';
import { silentLogger } from '../core/logger.js';
import { createMetrics } from '../core/metrics.js';
import { SourceStats, type SourceKind } from '../core/source.js';
import { buildSources } from '../sources/registry.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage: edge-gateway check --config FILE [--online]

Validates the configuration and prints a summary, without connecting to anything. Every problem is
named by its setting and value.

With --online it then connects to the tracking service: obtains a token with the configured
credentials, reads every page of GET /machines and GET /machine-variables, and prints a table of
the machine variables the configuration maps (ok, or missing with the settings that use them, or
unit_mismatch where a mapping's unit is not the catalog's) and the organisation's variables nothing
maps (unmapped). It sends no data.

Options:
  -c, --config FILE   configuration file (YAML or JSON); default $GATEWAY_CONFIG
      --online        also check credentials and the mapped machine variables against the service
  -h, --help          show this help

Exit codes:
  0  valid (and with --online: credentials accepted, every mapped machine variable exists)
  1  --online: the tracking service or token endpoint could not be reached, or kept failing
  2  the configuration is not valid, or a wrong option
  3  --online: some mapped machine variables do not exist in the organisation
  4  --online: the credentials or the organisation were refused (401, 403)
  5  --online: every mapped variable exists, but a mapping's unit is not the catalog's`;

export async function checkCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(argv, { config: { type: 'string', short: 'c' }, online: { type: 'boolean' } }, HELP);
  if (!parsed) return 0;
  const file = parsed.values.config ?? process.env.GATEWAY_CONFIG;
  if (!file) throw new UsageError(`--config FILE is required (or set GATEWAY_CONFIG)\n\n${HELP}`);
  const loaded = loadConfigFile(file);
  // Factories run without I/O, so cross-field problems (duplicate names, register overlaps) show here too.
  const metrics = createMetrics();
  const sources = await buildSources(loaded.config, (name: string, kind: SourceKind) => ({
    sink: { append: async () => undefined },
    logger: silentLogger(),
    stats: new SourceStats(name, kind, metrics, systemClock),
    metrics,
    clock: systemClock,
    dataDir: '/nonexistent',
  }));
  process.stdout.write(`${loaded.path}: configuration is valid\n\n${summary(loaded.config, sources.map((s) => `${s.kind}:${s.name}`))}`);
  for (const w of loaded.warnings) process.stdout.write(`warning: ${w}\n`);
  if (!parsed.values.online) return 0;
  return checkOnline(loaded.config);
}

/** `--online`: credentials and the catalog of the organisation (uplink/catalog.ts, catalog-check.ts). Returns the exit code. */
async function checkOnline(config: GatewayConfig): Promise<number> {
  // Loaded only here: a plain check stays free of the HTTP client.
  const { RequestBudget } = await import('../uplink/budget.js');
  const { TrackingClient } = await import('../uplink/client.js');
  const { CatalogCheckError, fetchCatalog, verifyCredentials } = await import('../uplink/catalog.js');
  const { CATALOG_EXIT, catalogExit, compareCatalog, renderCatalogReport } = await import('./catalog-check.js');
  const { mappedVariables } = await import('../sources/mapped-variables.js');
  const metrics = createMetrics();
  const budget = new RequestBudget(config.uplink.requests_per_minute, systemClock, metrics);
  const client = new TrackingClient({ service: config.service, budget, metrics, logger: silentLogger(), clock: systemClock, connections: 2 });
  const write = (text: string) => process.stdout.write(text);
  try {
    write(`\nonline check of organisation ${config.service.organisation_id} at ${config.service.base_url}\n`);
    const credentials = await verifyCredentials(client, config.service);
    write(`  credentials   ${credentials}\n`);
    const catalog = await fetchCatalog(client, config.service);
    const pages = (n: number) => `${n} page${n === 1 ? '' : 's'}`;
    write(`  organisation  ${catalog.machines.size.toLocaleString('en-US')} machines (${pages(catalog.pages.machines)}), ${catalog.variables.length.toLocaleString('en-US')} machine variables (${pages(catalog.pages.machine_variables)})\n\n`);
    const comparison = compareCatalog(mappedVariables(config), catalog);
    write(renderCatalogReport(comparison));
    return catalogExit(comparison);
  } catch (err) {
    if (!(err instanceof CatalogCheckError)) throw err;
    process.stderr.write(`edge-gateway check: ${err.message}\n`);
    return CATALOG_EXIT[err.kind];
  } finally {
    budget.close();
    await client.close();
  }
}

export function summary(c: GatewayConfig, sources: string[]): string {
  const auth = c.service.auth;
  const credential = auth.mode === 'client_credentials' ? `client ${auth.client_id}, secret from ${auth.client_secret.origin}` : `API key from ${auth.api_key.origin}${auth.secondary_api_key ? `, secondary from ${auth.secondary_api_key.origin}` : ''}`;
  const lines = [
    `gateway        ${c.gateway.name} (data in ${c.gateway.data_dir})`,
    `service        ${c.service.base_url}`,
    `organisation   ${c.service.organisation_id}`,
    `credentials    ${auth.mode}: ${credential}`,
    `item id field  ${c.service.item_id_field}`,
    `uplink         ${c.uplink.requests_per_minute} requests/min, batches of ${c.uplink.batch_size}, flush ${c.uplink.flush_interval} ms, ${c.uplink.max_in_flight} in flight`,
    `backfill       ${c.uplink.backfill.enabled ? `import jobs beyond ${Math.round(c.uplink.backfill.threshold / 1000)} s of backlog, files up to ${c.uplink.backfill.max_file_bytes.toLocaleString('en-US')} bytes` : 'off'}`,
    `buffer         ${c.buffer.path} (max ${c.buffer.max_bytes.toLocaleString('en-US')} bytes, when full: ${c.buffer.when_full}, commit every ${c.buffer.commit_interval} ms, synchronous ${c.buffer.synchronous})`,
    `http           ${c.http.enabled ? `${c.http.host}:${c.http.port}${c.http.api_token ? ' (api token set)' : ''}` : 'off'}`,
    `sources        ${sources.length === 0 ? 'none' : sources.join(', ')}`,
  ];
  if (c.uplink.budget_sharing.mode === 'fleet') lines.splice(6, 0, `budget share   fleet: ${c.uplink.requests_per_minute} requests/min for every gateway of group ${c.uplink.budget_sharing.group} together (at most ${c.uplink.budget_sharing.max_gateways} counted; this one never below ${Math.floor(c.uplink.requests_per_minute / c.uplink.budget_sharing.max_gateways)}/min)`);
  if (c.fleet?.mqtt) lines.push(`fleet          status to ${c.fleet.mqtt.url} under ${c.fleet.mqtt.prefix}/${c.gateway.name}/ every ${c.fleet.mqtt.interval / 1000} s${c.fleet.mqtt.username ? ` (user ${c.fleet.mqtt.username})` : ''}`);
  return `${lines.join('\n')}\n`;
}
