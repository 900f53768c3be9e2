import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEMO_FIXTURE, type EmulatorHandle } from '../../src/emulator/index.js';
import { ROOT } from './cli.js';
import { waitFor } from './wait.js';

/**
 * A real `edge-gateway run` child limited to 1,024 open files (prlimit, else the shell's ulimit),
 * for the descriptor-exhaustion tests: emulator uplink, a generator, the embedded broker (TCP and
 * WebSocket; user plc / PASSWORD) and the local HTTP server, all on free ports.
 */

/** The attacking sockets live in the test process: it needs a hard limit well above theirs (Node raises its soft limit to it). */
export const HARD_FD_LIMIT = Number(spawnSync('bash', ['-c', 'ulimit -Hn']).stdout.toString().trim());
export const ENOUGH_FDS = Number.isNaN(HARD_FD_LIMIT) || HARD_FD_LIMIT >= 4_096;
export const BROKER_PASSWORD = 'plc-pass-123';

const PRLIMIT = ['/usr/bin/prlimit', '/bin/prlimit'].find((p) => existsSync(p));

export interface LimitedGateway {
  child: ChildProcess;
  url: string;
  broker: { port: number; websocket: { port: number } };
  out(): string;
  /** Descriptors the child holds open now. */
  descriptors(): number;
  stop(): Promise<void>;
}

function spawnLimited(config: string, env: Record<string, string>): ChildProcess {
  const node = [process.execPath, '--import', 'tsx', 'src/cli.ts', 'run', '--config', config];
  const [cmd, args] = PRLIMIT ? [PRLIMIT, ['--nofile=1024:1024', '--', ...node]] : ['bash', ['-c', `ulimit -n 1024 && exec ${node.map((a) => `"${a}"`).join(' ')}`]];
  return spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...env } });
}

/** Starts the child in `dir` (files named after `name`); `children` receives it for the suite's clean-up. */
export async function startLimitedGateway(o: { name: string; dir: string; emu: EmulatorHandle; children: ChildProcess[] }): Promise<LimitedGateway> {
  const file = join(o.dir, `${o.name}.yaml`);
  writeFileSync(
    file,
    `
gateway: { name: ${o.name}, data_dir: ${join(o.dir, o.name)}, status_interval: 200ms }
log: { level: info, format: json }
service:
  base_url: ${o.emu.baseUrl}
  auth_url: ${o.emu.authUrl}
  organisation_id: org_demo
  auth: { mode: client_credentials, client_id: demo-gateway }
  request_timeout: 5s
uplink: { flush_interval: 100 }
buffer: { path: ${join(o.dir, `${o.name}.db`)} }
http: { enabled: true, host: 127.0.0.1, port: 0 }
generator:
  - { name: gen, variables: [mvr_gen_1], interval: 50ms }
mqtt:
  broker: { enabled: true, host: 127.0.0.1, port: 0, websocket: { port: 0 }, username: plc, password: { env: TEST_BROKER_PASSWORD } }
  connections:
    - name: in
      url: embedded
      subscriptions: [ { topic: plant/rate, format: number, variable: mvr_packer1_rate } ]
`,
  );
  const child = spawnLimited(file, { TEST_BROKER_PASSWORD: BROKER_PASSWORD, GATEWAY_CLIENT_SECRET: DEMO_FIXTURE.clients[0].client_secret });
  o.children.push(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const line = (msg: string) => out.split('\n').find((l) => l.includes(`"msg":"${msg}"`));
  const started = await waitFor(() => line('gateway started'), { timeoutMs: 90_000, what: `gateway started (output: ${out.slice(-2_000)})` });
  const listening = await waitFor(() => line('embedded MQTT broker listening'), { timeoutMs: 30_000, what: 'the broker listening' });
  return {
    child,
    url: (JSON.parse(started) as { http: string }).http,
    broker: JSON.parse(listening) as LimitedGateway['broker'],
    out: () => out,
    descriptors: () => readdirSync(`/proc/${child.pid}/fd`).length,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}
