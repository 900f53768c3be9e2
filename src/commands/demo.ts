import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DemoDeviceUnknown, type DemoDevices } from '../console/demo-routes.js';
import { loadConfigFile } from '../config/load.js';
import { describeError } from '../core/errors.js';
import { DEMO_CLIENT_SECRET } from '../emulator/demo-fixture.js';
import { startEmulator } from '../emulator/index.js';
import { runUntilSignal } from '../runtime/run.js';
import { firstBusyPort, plantWiring, startPlant, UnknownDeviceError, DEMO_PORT_ORDER, type Plant } from '../sim/plant.js';
import { prepareDemoConfig } from './demo-config.js';
import { demoDeviceCommand } from './demo-device.js';
import { createDemoLogger, createDemoView, demoBanner, DEFAULT_TIMINGS, plantEventText, startDemoStory, type DemoStory, type DemoView, type StoryTimings } from './demo-story.js';
import { parseFlags, UsageError } from './flags.js';

const DEFAULT_CONFIG = fileURLToPath(new URL('../../config/demo.yaml', import.meta.url));

const HELP = `Usage: edge-gateway demo [--config FILE] [--ports-from N] [--data-dir DIR]
       edge-gateway demo device [NAME down|up] [--url URL | --data-dir DIR]

Runs a whole plant on this machine, with no outside services: a simulated plant (Press 1 on an
OPC UA server, Mixer 1 on a Modbus TCP device, Packer 1 publishing JSON and Oven 1, a Sparkplug B
edge node, over MQTT), the built-in emulator of the tracking service, and the gateway reading the
plant and delivering to the emulator. The operator status is shown every few seconds.

About 40 s after the start Press 1 stops for 20 s: the gateway's downtime detector posts a range
annotation for it. About a minute after the start the tracking service is unreachable for 15 s:
the gateway keeps buffering and catches up. About 100 s after the start the gateway is stopped for
12 s while the plant keeps producing: when it runs again it reads Press 1's gap back from the OPC UA
server's history, and records the gap of every source (edge-gateway gaps list). Ctrl-C stops
everything.

The gateway runs from DIR/demo.yaml, written at the first start from the demo configuration and
kept afterwards: the console's Configuration tab edits it and Apply writes it. Later starts run
from it as it is (--config is then not read); delete it to start over.

\`edge-gateway demo device press1 down\` (press1, mixer1, packer1, oven1) stops a simulated device
for real, so the gateway sees it go and records a gap; \`up\` starts it again on the same port. The
console's Overview has the same switches. Without NAME it lists the devices.

Options:
  -c, --config FILE   demo configuration written to DIR/demo.yaml at the first start (default:
                      config/demo.yaml of this package); its addresses also say where the
                      simulated plant listens
      --ports-from N  listen on N (${DEMO_PORT_ORDER[0]}), N+1 (${DEMO_PORT_ORDER[1]}), N+2 (${DEMO_PORT_ORDER[2]}), N+3 (${DEMO_PORT_ORDER[3]}) and
                      N+4 (${DEMO_PORT_ORDER[4]}) instead of the configured ports, e.g. beside another demo
      --data-dir DIR  keep demo.yaml, the buffer and the gateway's files in DIR (default:
                      gateway.data_dir of the demo configuration, ./data/demo)
  -h, --help          show this help`;

/** Duration flags: `15s`, `500ms`, `2m`; a bare number is seconds. */
function durationFlag(name: string, value: string | undefined, fallback: number, opts: { positive?: boolean } = {}): number {
  if (value === undefined) return fallback;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(value.trim());
  if (!m) throw new UsageError(`--${name}: "${value}" is not a duration (examples: 15s, 500ms, 2m)`);
  const ms = Math.round(Number(m[1]) * { ms: 1, s: 1_000, m: 60_000 }[(m[2] ?? 's') as 's']);
  if (opts.positive && ms <= 0) throw new UsageError(`--${name}: "${value}" must be longer than 0`);
  return ms;
}

function portsFromFlag(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1024 || n > 65_531) throw new UsageError(`--ports-from: "${value}" is not a port number from 1024 to 65531`);
  return n;
}

export async function demoCommand(argv: string[]): Promise<number> {
  if (argv[0] === 'device') return demoDeviceCommand(argv.slice(1), DEFAULT_CONFIG);
  const parsed = parseFlags(
    argv,
    {
      config: { type: 'string', short: 'c' },
      'ports-from': { type: 'string' },
      'data-dir': { type: 'string' },
      // Not in the help: the story's timings, so a test can run it in seconds.
      'downtime-after': { type: 'string' },
      downtime: { type: 'string' },
      'outage-after': { type: 'string' },
      outage: { type: 'string' },
      'restart-after': { type: 'string' },
      restart: { type: 'string' },
    },
    HELP,
  );
  if (!parsed) return 0;
  const v = parsed.values;
  const timings: StoryTimings = {
    downtimeAfterMs: durationFlag('downtime-after', v['downtime-after'], DEFAULT_TIMINGS.downtimeAfterMs),
    downtimeMs: durationFlag('downtime', v.downtime, DEFAULT_TIMINGS.downtimeMs, { positive: true }),
    outageAfterMs: durationFlag('outage-after', v['outage-after'], DEFAULT_TIMINGS.outageAfterMs),
    outageMs: durationFlag('outage', v.outage, DEFAULT_TIMINGS.outageMs, { positive: true }),
    restartAfterMs: durationFlag('restart-after', v['restart-after'], DEFAULT_TIMINGS.restartAfterMs),
    restartMs: durationFlag('restart', v.restart, DEFAULT_TIMINGS.restartMs, { positive: true }),
  };
  const portsFrom = portsFromFlag(v['ports-from']);

  // The emulator's lab credential; a real deployment gets its secret from the environment.
  process.env.GATEWAY_CLIENT_SECRET ??= DEMO_CLIENT_SECRET;
  // A real file in the data folder, so the console's Apply works (demo-config.ts).
  const file = prepareDemoConfig({ template: v.config ?? DEFAULT_CONFIG, templateGiven: v.config !== undefined, portsFrom, dataDir: v['data-dir'] });
  const config = file.config;
  const base = new URL(config.service.base_url);
  const wiring = plantWiring(config);

  const busy = await firstBusyPort([
    { port: Number(base.port || 80), what: 'the tracking-service emulator (service.base_url)' },
    ...(config.http.enabled ? [{ port: config.http.port, what: "the gateway's HTTP server (http.port)" }] : []),
    ...(wiring.opcua ? [{ port: wiring.opcua.port, what: 'the OPC UA server of Press 1 (opcua.servers[].endpoint)' }] : []),
    ...(wiring.modbus ? [{ port: wiring.modbus.port, what: 'the Modbus device Mixer 1 (modbus.devices[].port)' }] : []),
    ...(config.mqtt?.broker?.enabled ? [{ port: config.mqtt.broker.port, what: "the gateway's MQTT broker (mqtt.broker.port)" }] : []),
  ]);
  if (busy) {
    process.stderr.write(
      `edge-gateway demo: port ${busy.port}, for ${busy.what}, is in use (is another demo running?). ` +
        `Stop the program that uses it, or run the demo on other ports: edge-gateway demo --ports-from 18780\n`,
    );
    return 1;
  }

  const dataDir = config.gateway.data_dir;
  mkdirSync(dataDir, { recursive: true });
  const logFile = join(dataDir, 'demo.log');
  const view = createDemoView();
  view.setBanner(['Edge gateway demo: starting the tracking-service emulator, the simulated plant and the gateway ...']);
  const logger = createDemoLogger(config, view, logFile);

  const emulator = await startEmulator({ host: base.hostname, port: Number(base.port || 80) });
  const startedPlant = await startPlant({
    wiring,
    press: { stopAfterMs: timings.downtimeAfterMs, stopForMs: timings.downtimeMs },
    dataDir: join(dataDir, 'plant'),
    onEvent: (e) => view.event(plantEventText(e), e.at),
    logger: logger.child({ component: 'plant' }),
  }).catch(async (err: unknown) => {
    await emulator.close();
    throw err;
  });

  let story: DemoStory | null = null;
  // The story's gateway restart stops the gateway alone: the plant and the emulator go on.
  let restarting = false;
  let stopRequested = false;
  const stopPlantAndEmulator = async () => {
    if (restarting) return;
    story?.stop();
    await startedPlant.close();
    await emulator.close();
  };
  const runOptions = { logger, configPath: file.path, demo: demoDevices(startedPlant, view), onStatus: () => story?.showStatus(), extraClose: stopPlantAndEmulator };
  let running = await runUntilSignal(config, runOptions).catch(async (err: unknown) => {
    await stopPlantAndEmulator();
    throw err;
  });
  let restartInFlight: Promise<unknown> | null = null;
  const restartGateway = (downMs: number) => {
    const p = restartOnce(downMs);
    restartInFlight = p.catch(() => undefined).finally(() => (restartInFlight = null));
    return p;
  };
  const restartOnce = async (downMs: number) => {
    restarting = true;
    try {
      await running.stop();
    } finally {
      restarting = false;
    }
    await new Promise((r) => setTimeout(r, downMs));
    if (stopRequested) {
      await stopPlantAndEmulator();
      throw new Error('the demo is stopping');
    }
    // The file as it is now: Apply may have changed it since the start.
    let next = config;
    try {
      next = loadConfigFile(file.path).config;
    } catch (err) {
      view.event(`${file.path} does not load (${describeError(err)}); the gateway starts again with the configuration it had`);
    }
    running = await runUntilSignal(next, runOptions);
    return running.handle;
  };
  try {
    await startedPlant.startPublisher();
  } catch (err) {
    view.event(`the MQTT publisher of Packer 1 and Oven 1 did not start: ${(err as Error).message}`);
  }

  const banner = demoBanner({ plant: startedPlant.describe(), serviceUrl: emulator.baseUrl, gatewayUrl: running.handle.httpUrl, console: running.handle.config.http.console, configFile: file.path, logFile: process.stdout.isTTY ? logFile : null });
  view.setBanner(banner.lines, banner.essential);
  for (const note of file.notes) view.event(note);
  story = startDemoStory({ view, emulator, gateway: running.handle, timings, plantStartedAt: startedPlant.startedAt, restart: restartGateway });
  story.showStatus();

  const onStopping = () => {
    stopRequested = true;
    story?.stop();
    view.final('stopping: the gateway commits what it read and closes its connections, then the plant and the emulator stop ...');
  };
  process.once('SIGINT', onStopping);
  process.once('SIGTERM', onStopping);
  // A restart replaces `running`; the demo ends when the current gateway has stopped.
  for (let r = running; ; r = running) {
    await r.done;
    if (restartInFlight) await restartInFlight;
    if (r === running) break;
  }
  process.off('SIGINT', onStopping);
  process.off('SIGTERM', onStopping);
  view.final('demo stopped.');
  return 0;
}

/** What taking each device down does, for the view. */
const DOWN_TEXT: Record<string, string> = {
  press1: 'its OPC UA server stopped; the gateway sees the connection go and records a gap',
  mixer1: 'its Modbus TCP server stopped; the gateway sees the device go and records a gap',
  packer1: "its MQTT client disconnected from the gateway's broker; its values stop",
  oven1: "its Sparkplug B edge node disconnected (NDEATH); its values stop",
};

/**
 * The demo's devices as the gateway's console sees them (console/demo-routes.ts): each switch
 * really stops or starts the simulated server or client, and the view says what happened.
 */
function demoDevices(plant: Plant, view: DemoView): DemoDevices {
  return {
    list: () => plant.devices(),
    async set(name, up) {
      try {
        const before = plant.devices().find((d) => d.name === name);
        const d = await plant.setDevice(name, up);
        if (before?.up !== d.up) view.event(up ? `${d.label} is up again (${d.what}); the gateway reconnects by itself` : `${d.label} taken down (switch): ${DOWN_TEXT[d.name] ?? 'stopped'}`);
        return d;
      } catch (err) {
        if (err instanceof UnknownDeviceError) throw new DemoDeviceUnknown(err.message);
        throw err;
      }
    },
  };
}
