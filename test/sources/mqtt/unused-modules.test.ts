import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../helpers/cli.js';

/**
 * A small plant pays only for what it uses: a gateway subscribed to a remote broker does not load
 * the embedded broker (aedes, and its websocket listener ws), the Sparkplug B codec until a
 * Sparkplug message arrives (sparkplug-payload, protobufjs), nor the terminal log formatter
 * (pino-pretty) when it logs JSON. Seen from the process itself: `edge-gateway check` builds the
 * sources as `run` does, and a preloaded probe writes down every module it loads (ES modules
 * through a load hook, CommonJS ones from require.cache at exit).
 */
const BASE = `
service:
  base_url: https://api.example.com/tracking/v1
  auth_url: https://auth.example.com
  organisation_id: org_acme
  auth: { mode: client_credentials, client_id: plant-a }
log: { format: json }
`;
const CONNECTION = `{ name: line, url: mqtt://127.0.0.1:1, subscriptions: [{ topic: 'spBv1.0/plant/#', format: sparkplug, metrics: [{ name: Temperature, variable: mvr_spb }] }] }`;

async function loadedModules(config: string): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-unused-modules-'));
  const out = join(dir, 'loaded.txt');
  // CommonJS modules: require.cache at exit. ES modules (aedes is one): a load hook, on its own thread.
  writeFileSync(join(dir, 'probe.cjs'), `process.on('exit', () => require('node:fs').appendFileSync(${JSON.stringify(out)}, Object.keys(require.cache).join('\\n')));\n`);
  writeFileSync(join(dir, 'hooks.mjs'), `import { appendFileSync } from 'node:fs';\nexport async function load(url, context, next) { appendFileSync(${JSON.stringify(out)}, url + '\\n'); return next(url, context); }\n`);
  writeFileSync(join(dir, 'probe.mjs'), `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(join(dir, 'hooks.mjs')).href)});\n`);
  writeFileSync(join(dir, 'gw.yaml'), BASE + config);
  const r = await runCli(['check', '--config', join(dir, 'gw.yaml')], { env: { NODE_OPTIONS: `--require ${join(dir, 'probe.cjs')} --import ${pathToFileURL(join(dir, 'probe.mjs')).href}`, GATEWAY_CLIENT_SECRET: 'x' }, timeoutMs: 120_000 });
  expect(r.err).toBe('');
  expect(r.code).toBe(0);
  return readFileSync(out, 'utf8').split('\n');
}
const packages = (loaded: string[], names: string[]) => names.filter((n) => loaded.some((m) => m.includes(`/node_modules/${n}/`)));

describe('modules a gateway does not use stay unloaded', () => {
  it('a remote MQTT connection with a Sparkplug subscription loads mqtt.js but not aedes, ws, sparkplug-payload, protobufjs or pino-pretty; the embedded broker loads aedes', async () => {
    const [remote, broker] = await Promise.all([
      loadedModules(`mqtt:\n  connections:\n    - ${CONNECTION}\n`),
      loadedModules(`mqtt:\n  broker: { enabled: true, allow_anonymous: true, port: 0 }\n  connections:\n    - ${CONNECTION}\n`),
    ]);
    expect(packages(remote, ['mqtt'])).toEqual(['mqtt']);
    expect(packages(remote, ['aedes', 'ws', 'sparkplug-payload', 'protobufjs', 'pino-pretty'])).toEqual([]);
    // The probe sees what is loaded: the broker's modules when it is configured.
    expect(packages(broker, ['aedes'])).toEqual(['aedes']);
  }, 150_000);
});
