import { existsSync } from 'node:fs';
import { request } from 'undici';
import type { DemoDevice, DemoDevicesResponse, DemoSwitchResponse } from '../console/api/demo.js';
import { describeError } from '../core/errors.js';
import { demoConfigPath } from './demo-config.js';
import { parseFlags, UsageError } from './flags.js';
import { statusUrlFromConfig, tokenFromConfig } from './status.js';

const HELP = `Usage: edge-gateway demo device [NAME down|up] [--url URL | --data-dir DIR] [--token TOKEN]

Takes a simulated device of the running demo down, or brings it back, through the
demo gateway's local API (POST /console/api/demo/devices/NAME); without NAME, lists the devices.

  press1   OPC UA server of Press 1: down stops the server, the gateway records a gap
  mixer1   Modbus TCP device Mixer 1: down stops the device, the gateway records a gap
  packer1  MQTT client of Packer 1: down disconnects it from the gateway's broker
  oven1    Sparkplug B edge node of Oven 1: down disconnects it (NDEATH)

up starts it again on the same port; the gateway reconnects by itself. A gateway that does not
run the demo refuses (exit 1).

Options:
  -u, --url URL       the demo gateway's address (default: http.host and http.port of the demo's
                      DIR/demo.yaml, else http://127.0.0.1:8080)
      --data-dir DIR  the demo's data folder, as given to edge-gateway demo (default ./data/demo)
      --token TOKEN   http.api_token, when set (default $GATEWAY_API_TOKEN, else the file's)
  -h, --help          show this help

Exit codes: 0 done, 1 refused or no demo answers, 2 wrong option.`;

export async function demoDeviceCommand(argv: string[], defaultTemplate: string): Promise<number> {
  const parsed = parseFlags(argv, { url: { type: 'string', short: 'u' }, 'data-dir': { type: 'string' }, token: { type: 'string' } }, HELP);
  if (!parsed) return 0;
  const [name, state, ...rest] = parsed.positionals;
  if (rest.length > 0) throw new UsageError(`unexpected "${rest.join(' ')}"\n\n${HELP}`);
  if (name !== undefined && state !== 'down' && state !== 'up') throw new UsageError(`${name}: say down or up${state === undefined ? '' : `, not "${state}"`}\n\n${HELP}`);
  let file: string | null = null;
  if (!parsed.values.url) {
    try {
      file = demoConfigPath(defaultTemplate, parsed.values['data-dir']);
    } catch {
      file = null;
    }
    if (file && !existsSync(file)) file = null;
  }
  const base = (parsed.values.url ?? (file ? statusUrlFromConfig(file) : 'http://127.0.0.1:8080')).replace(/\/+$/, '');
  const token = parsed.values.token ?? (process.env.GATEWAY_API_TOKEN || undefined) ?? (file ? tokenFromConfig(file) : undefined);
  const auth: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  try {
    if (name === undefined) {
      const r = await request(`${base}/console/api/demo`, { headers: auth, headersTimeout: 10_000, bodyTimeout: 10_000 });
      const body = (await r.body.json()) as DemoDevicesResponse & { error?: { message: string } };
      if (r.statusCode !== 200) return refused(base, r.statusCode, body.error?.message);
      if (!body.demo) return refused(base, 409, body.message);
      for (const d of body.devices) process.stdout.write(`${line(d)}\n`);
      return 0;
    }
    // A switch waits for the server to stop or start (an OPC UA server takes a few seconds).
    const r = await request(`${base}/console/api/demo/devices/${encodeURIComponent(name)}`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ state }),
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
    const body = (await r.body.json()) as DemoSwitchResponse & { error?: { message: string } };
    if (r.statusCode !== 200) return refused(base, r.statusCode, body.error?.message);
    process.stdout.write(`${line(body.device)}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`edge-gateway demo device: no demo answers at ${base} (${describeError(err)}). Is edge-gateway demo running? Give --url or --data-dir for a demo elsewhere\n`);
    return 1;
  }
}

function line(d: DemoDevice): string {
  return `${d.name.padEnd(8)} ${(d.up ? 'up' : 'DOWN').padEnd(5)} since ${new Date(d.since).toLocaleTimeString('en-GB')}  ${d.label}: ${d.what}`;
}

function refused(base: string, status: number, message: string | undefined): number {
  process.stderr.write(`edge-gateway demo device: ${base} refused (HTTP ${status}): ${message ?? 'no reason given'}\n`);
  return 1;
}
