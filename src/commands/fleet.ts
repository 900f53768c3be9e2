import mqtt from 'mqtt';
import { mqttClientOptions, mqttUrlProblem } from '../config/mqtt-connection.js';
import { resolveSecret, type Secret } from '../config/secrets.js';
import { describeError } from '../core/errors.js';
import { fleetPrefix } from '../fleet/config.js';
import { FleetView, renderFleetTable } from '../fleet/view.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage: edge-gateway fleet --broker URL [--prefix P] [--username U] [--once | --json] [--wait S]

Shows every gateway that publishes its status on the plant broker (fleet.mqtt in each gateway's
configuration): state (online, stale, offline with its last status, stopped), uplink condition,
sources up/down, backlog, age of the oldest unsent sample, ETA, buffer space left, its share of the
address's request budget, version, and the last error. Refreshed live until Ctrl-C.

Options:
  -b, --broker URL       the plant broker (mqtt://host:1883, mqtts://, ws://, wss://)
  -p, --prefix P         topic prefix the gateways use (default: edge-gateway/fleet)
  -u, --username U       user name for the broker; the password comes from $FLEET_MQTT_PASSWORD
                         or the file named by $FLEET_MQTT_PASSWORD_FILE
      --once             print the table once (after --wait seconds of listening) and exit
      --json             print the rows as JSON once and exit
      --wait S           seconds to collect the retained statuses before printing (default 2)
  -h, --help             show this help

Exit codes: 0 shown, 1 the broker cannot be reached, 2 wrong option.`;

export async function fleetCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(
    argv,
    { broker: { type: 'string', short: 'b' }, prefix: { type: 'string', short: 'p' }, username: { type: 'string', short: 'u' }, once: { type: 'boolean' }, json: { type: 'boolean' }, wait: { type: 'string' } },
    HELP,
  );
  if (!parsed) return 0;
  const v = parsed.values;
  if (!v.broker) throw new UsageError(`--broker is required (the plant broker's URL, e.g. mqtt://broker.plant.local:1883)\n\n${HELP}`);
  // The same rules as fleet.mqtt.url (config/mqtt-connection.ts).
  const bad = mqttUrlProblem(v.broker);
  if (bad?.kind === 'credentials') throw new UsageError('--broker: put no user name or password in the URL; use --username and $FLEET_MQTT_PASSWORD');
  if (bad) throw new UsageError(`--broker: ${bad.kind === 'scheme' ? bad.reason : bad.message}`);
  const prefix = v.prefix ?? 'edge-gateway/fleet';
  const p = fleetPrefix.safeParse(prefix);
  if (!p.success) throw new UsageError(`--prefix: "${prefix}" must be topic levels without wildcards (+, #) and without a leading, trailing or doubled "/"`);
  const wait = v.wait === undefined ? 2 : Number(v.wait);
  if (!Number.isFinite(wait) || wait < 0) throw new UsageError(`--wait: "${v.wait}" is not a number of seconds`);
  let password: Secret | undefined;
  if (v.username) {
    const r = resolveSecret({ env: 'FLEET_MQTT_PASSWORD' });
    if (r.ok) password = r.secret;
  }

  const view = new FleetView(prefix);
  const connection = { url: v.broker, username: v.username, password, keepalive: 60_000, connect_timeout: 10_000 };
  const client = mqtt.connect(v.broker, {
    ...mqttClientOptions(connection, `edge-gateway-fleet-viewer-${process.pid}-${Math.random().toString(16).slice(2, 8)}`),
    clean: true,
    reconnectPeriod: 2_000,
  });
  const table = { view, changed: true };
  client.on('message', (topic, payload) => {
    if (view.ingest(topic, payload, Date.now())) table.changed = true;
  });
  const connected = await new Promise<boolean>((resolve) => {
    const t = setTimeout(() => resolve(false), 10_000);
    client.once('connect', () => {
      clearTimeout(t);
      resolve(true);
    });
    client.on('error', (err) => process.stderr.write(`edge-gateway fleet: ${describeError(err)}\n`));
  });
  if (!connected) {
    process.stderr.write(`edge-gateway fleet: the broker at ${v.broker} cannot be reached\n`);
    client.end(true);
    return 1;
  }
  // Whatever happens from here on (a row that cannot be shown, Ctrl-C), the connection is closed,
  // or it would keep the process alive after the command is done.
  try {
    return await show(client, table, { prefix, broker: v.broker, wait, once: Boolean(v.once || v.json), json: Boolean(v.json) });
  } finally {
    await new Promise<void>((r) => client.end(true, () => r()));
  }
}

/** Subscribes, then prints the table once or live until Ctrl-C. */
async function show(client: mqtt.MqttClient, table: { view: FleetView; changed: boolean }, o: { prefix: string; broker: string; wait: number; once: boolean; json: boolean }): Promise<number> {
  const { view } = table;
  const { prefix } = o;
  client.subscribe({ [`${prefix}/+/status`]: { qos: 1 }, [`${prefix}/+/last`]: { qos: 1 } });
  await new Promise((r) => setTimeout(r, o.wait * 1000));
  if (o.once) {
    const rows = view.rows(Date.now());
    process.stdout.write(o.json ? `${JSON.stringify(rows, null, 2)}\n` : renderFleetTable(rows, view.notKeptDocuments));
    return 0;
  }
  // Live: redraw every second (on a terminal, in place), or when something changed.
  const tty = process.stdout.isTTY;
  let stopping = false;
  const stop = () => (stopping = true);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  let ticks = 0;
  while (!stopping) {
    // Also every 5 s when nothing arrived: a silent gateway turns stale without a message.
    if (table.changed || tty || ++ticks % 5 === 0) {
      table.changed = false;
      const text = `${new Date().toISOString()}  ${prefix}/+ on ${o.broker}${client.connected ? '' : '  (broker unreachable, reconnecting)'}\n\n${renderFleetTable(view.rows(Date.now()), view.notKeptDocuments)}`;
      process.stdout.write(tty ? `\x1b[2J\x1b[H${text}` : `${text}\n`);
    }
    await new Promise((r) => setTimeout(r, 1_000));
  }
  return 0;
}
