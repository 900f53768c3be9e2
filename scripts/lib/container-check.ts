/**
 * scripts/container-check: builds the repository's unmodified Dockerfile with a real OCI engine
 * (buildah) and runs the image with podman, the way an operator would with Docker:
 *
 *   1. the base: a stand-in for node:20-bookworm-slim built on this machine (base-image.ts; no image
 *      registry is reachable here), cached across runs by a hash of its inputs;
 *   2. `buildah bud --format docker --pull=never --layers` (docker format, or HEALTHCHECK is
 *      dropped), npm in RUN steps trusting this machine's certificate authorities through a folder
 *      mounted as the build's /root (CA bundle + .npmrc; a mount, so nothing of it lands in the
 *      image); layers of the last build are reused where their inputs are unchanged, as `docker
 *      build` does (the dependencies while package-lock.json stays, everything after a change of
 *      src/ is built again);
 *   3. the image: user, HEALTHCHECK, tini entry point; no compiler; no npm credentials or CA files;
 *   4. the emulator, run from the same image as other teams would (`emulator --host 0.0.0.0`,
 *      published with -p), its human start-up text free of JSON log lines;
 *   5. the gateway container: uid 10001 under tini, a mounted read-only config and a client secret
 *      given as a *_FILE file; `check` passes; `podman healthcheck run` healthy; samples delivered
 *      to the emulator; `edge-gateway status` inside works; the secret is in no image history, log,
 *      environment, status or metrics; `podman stop` ends it within 10 s with exit 0; the buffer is
 *      on the data volume, owned by uid 10001.
 *
 * Exit code: 0 passed, 1 failed, 2 usage, 3 this machine cannot run it (tools missing, not root).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { configYaml } from '../../src/config/yaml-writer.js';
import { DEMO_CLIENT_ID, DEMO_FIXTURE, DEMO_ORGANISATION_ID } from '../../src/emulator/demo-fixture.js';
import { BASE_IMAGE, ensureBaseImage } from './base-image.js';
import { CannotRunHere, CheckFailure, cannotRunReason, openEngine, type Engine } from './engine.js';

const REPO = resolve(import.meta.dirname, '..', '..');
/** `docker stop` waits 10 s before SIGKILL; the gateway must be gone before that. */
const STOP_DEADLINE_MS = 10_000;
const IMAGE = 'localhost/edge-gateway:container-check';
/**
 * The Dockerfile's build stage, tagged so that its layers (npm ci and the compilation of
 * better-sqlite3) are kept between runs as the layer cache; `image prune` removes only layers no
 * tagged image uses.
 */
const BUILD_STAGE_IMAGE = 'localhost/edge-gateway:container-check-build';
const GATEWAY_UID = 10001;
const COMPILERS = ['gcc', 'g++', 'cc', 'c++', 'cpp', 'make', 'python3', 'clang', 'node-gyp'];
const DEFAULT_WORK_DIR = '/var/tmp/edge-gateway-container-check';

const USAGE = `Usage: scripts/container-check [--work-dir DIR] [--keep]

Builds the Dockerfile with buildah (on a locally built stand-in for node:20-bookworm-slim; layers of
the last build reused where their inputs are unchanged) and runs
the image with podman: the emulator from the image, then the gateway as uid 10001 under tini with a
mounted config and a *_FILE secret; health check, delivery, status, secrets, stop. See docs/container.md.

  --work-dir DIR  engine storage, containers.conf, npm cache and logs
                  (default ${DEFAULT_WORK_DIR}; the base image and the last build's
                  layers are cached there)
  --keep          keep the containers, volume and image for a look afterwards

Exit code: 0 passed, 1 failed, 2 usage, 3 this machine cannot run it (buildah, podman, runc,
debootstrap missing, or not root).`;

const log = (line: string) => process.stdout.write(`${line}\n`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolvePort(port));
    });
  });
}

async function get(url: string, timeoutMs = 5_000): Promise<{ status: number; text: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, text: await res.text() };
}

async function poll<T>(what: string, deadlineMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + deadlineMs;
  let last = '';
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      if (err instanceof CheckFailure) throw err;
      last = (err as Error).message;
    }
    if (Date.now() > end) throw new CheckFailure(`${what}: not within ${seconds(deadlineMs)}${last ? ` (last: ${last})` : ''}`);
    await delay(1_000);
  }
}

/** One run at a time per work folder (a CI run and a developer on the same machine). */
async function lock(dir: string): Promise<() => void> {
  const path = join(dir, 'lock');
  const end = Date.now() + 30 * 60_000;
  let told = false;
  for (;;) {
    try {
      mkdirSync(path);
      writeFileSync(join(path, 'pid'), String(process.pid));
      return () => rmSync(path, { recursive: true, force: true });
    } catch {
      const pid = Number(readFileSync(join(path, 'pid'), { encoding: 'utf8', flag: 'a+' }) || 0);
      let alive = false;
      try {
        if (pid > 0) process.kill(pid, 0);
        alive = pid > 0;
      } catch {
        alive = false;
      }
      if (!alive) {
        rmSync(path, { recursive: true, force: true });
        continue;
      }
      if (!told) log(`waiting for another container-check (pid ${pid}) using ${dir}`);
      told = true;
      if (Date.now() > end) throw new CheckFailure(`another container-check (pid ${pid}) holds ${path} for more than 30 minutes`);
      await delay(2_000);
    }
  }
}

/**
 * The folder mounted as the build's /root: this machine's CA bundle and an .npmrc naming it (npm in
 * RUN steps then trusts the same certificate authorities as npm here), plus npm's cache, kept
 * between runs. Registry and proxy settings are carried over, credentials never.
 */
async function npmRoot(engine: Engine): Promise<string> {
  const dir = join(engine.dir, 'npm-root');
  mkdirSync(dir, { recursive: true });
  const setting = async (name: string) => {
    const r = await engine.run(['npm', 'config', 'get', name]);
    const v = r.stdout.trim();
    return r.code === 0 && v !== '' && v !== 'null' && v !== 'undefined' ? v : undefined;
  };
  const cafile = [await setting('cafile'), process.env.NODE_EXTRA_CA_CERTS, '/etc/ssl/certs/ca-certificates.crt'].find((f) => f && existsSync(f));
  const lines = ['# Written by scripts/container-check: mounted as /root during the build only.', 'audit=false', 'fund=false', 'update-notifier=false'];
  if (cafile) {
    writeFileSync(join(dir, 'ca-certificates.crt'), readFileSync(cafile));
    lines.push('cafile=/root/ca-certificates.crt');
  }
  for (const name of ['registry', 'proxy', 'https-proxy', 'noproxy']) {
    const v = await setting(name);
    if (v && !/[:/]\/\/[^/]*@/.test(v)) lines.push(`${name}=${v}`);
  }
  writeFileSync(join(dir, '.npmrc'), `${lines.join('\n')}\n`);
  return dir;
}

interface Names {
  emulator: string;
  gateway: string;
  volume: string;
}

async function checkImage(engine: Engine): Promise<void> {
  // Go templates over podman's image data (the JSON output spells some keys differently).
  const field = async (tpl: string) => (await engine.podman(['image', 'inspect', '--format', tpl, IMAGE], { check: 'image inspect' })).stdout.trim();
  const cfg = {
    User: await field('{{.Config.User}}'),
    Entrypoint: JSON.parse((await field('{{json .Config.Entrypoint}}')) || 'null') as string[] | null,
    Cmd: JSON.parse((await field('{{json .Config.Cmd}}')) || 'null') as string[] | null,
    Healthcheck: JSON.parse((await field('{{json .Config.Healthcheck}}')) || 'null') as { Test?: string[] } | null,
  };
  const problems: string[] = [];
  if (cfg.User !== 'gateway') problems.push(`USER is ${JSON.stringify(cfg.User)}, not gateway`);
  if (!cfg.Healthcheck?.Test?.join(' ').includes('GATEWAY_HEALTH_URL')) problems.push('no HEALTHCHECK in the image (built without --format docker?)');
  if (cfg.Entrypoint?.[0] !== '/usr/bin/tini') problems.push(`ENTRYPOINT ${JSON.stringify(cfg.Entrypoint)} does not start tini`);
  if (cfg.Cmd?.[0] !== 'run') problems.push(`CMD ${JSON.stringify(cfg.Cmd)} is not ["run"]`);
  if (problems.length) throw new CheckFailure(`the image: ${problems.join('; ')}`);
  log('image: USER gateway, HEALTHCHECK kept (docker format), ENTRYPOINT tini, CMD run');

  // No compiler, and nothing of the build's /root mount (CA bundle, .npmrc, npm cache) left behind.
  const probe = await engine.podman(
    [
      'run', '--rm', '--pull=never', '--network', 'none', '--user', 'root', '--entrypoint', '/bin/sh', IMAGE, '-c',
      `for c in ${COMPILERS.join(' ')}; do command -v "$c"; done; ` +
        `dpkg-query -W -f='\${Package} \${Status}\\n' gcc g++ cpp make python3 binutils 2>/dev/null | grep ' installed$'; ` +
        'echo ROOT:; ls -A /root; echo NPMRC:; find / -xdev \\( -name .npmrc -o -name _cacache \\) -not -path "/app/node_modules/*" -print 2>/dev/null; ' +
        'echo DEBS:; ls /var/cache/apt/archives | grep "\\.deb$"; ls /var/lib/apt/lists | grep -v "^lock$\\|^partial$\\|^auxfiles$"; echo END',
    ],
    { check: 'probe of the image' },
  );
  const [found, rest] = probe.stdout.split('ROOT:\n');
  if (found.trim()) throw new CheckFailure(`the runtime image holds a compiler or build tool:\n${found.trim()}`);
  log(`no compiler in the runtime image (none of ${COMPILERS.join(', ')}; no gcc/g++/make/python3 package)`);
  const [rootAndNpm, aptFiles] = rest.replace(/END\s*$/, '').split('DEBS:\n');
  const [rootFiles, npmFiles] = rootAndNpm.split('NPMRC:\n');
  if (aptFiles.trim()) throw new CheckFailure(`apt left downloaded packages or lists in the runtime image: ${aptFiles.trim().split('\n').join(', ')}`);
  const leftovers = [...rootFiles.split('\n'), ...npmFiles.split('\n')].map((l) => l.trim()).filter(Boolean);
  const known = new Set(['.bashrc', '.profile']); // Debian's skeleton in /root, from the base image
  const unexpected = leftovers.filter((l) => !known.has(l));
  if (unexpected.length) throw new CheckFailure(`the build's /root mount left files in the image: ${unexpected.join(', ')}`);
  log('nothing of the build\'s /root mount (CA bundle, .npmrc, npm cache) is in the image; no apt lists or .debs');
}

/** The emulator from the image, as another team would run it; returns its published origin. */
async function startEmulatorContainer(engine: Engine, work: string, names: Names, secret: string): Promise<string> {
  const fixture = join(work, 'fixture.json');
  writeFileSync(fixture, JSON.stringify({ ...DEMO_FIXTURE, clients: DEMO_FIXTURE.clients.map((c) => ({ ...c, client_secret: secret })) }));
  chmodSync(fixture, 0o644);
  const port = await freePort();
  await engine.podman(
    ['run', '-d', '--pull=never', '--name', names.emulator, '-p', `127.0.0.1:${port}:8780`, '-v', `${fixture}:/fixture.json:ro`, IMAGE, 'emulator', '--host', '0.0.0.0', '--fixture', '/fixture.json'],
    { check: 'starting the emulator container' },
  );
  const origin = `http://127.0.0.1:${port}`;
  await poll('the emulator container answers on its published port', 60_000, async () => ((await get(`${origin}/_emulator/stats`)).status === 200 ? true : undefined));
  const out = await engine.podman(['logs', names.emulator]);
  const human = out.stdout.split('\n').filter((l) => l.trim() !== '');
  if (!human.some((l) => l.includes('Tracking-service emulator running'))) throw new CheckFailure(`the emulator container printed no start-up text on stdout:\n${out.stdout}\n${out.stderr}`);
  const json = human.filter((l) => l.trimStart().startsWith('{'));
  if (json.length) throw new CheckFailure(`JSON log lines in the emulator's human start-up text (stdout):\n${json.join('\n')}`);
  log(`emulator from the image: \`emulator --host 0.0.0.0\` published on ${origin}; start-up text on stdout has no JSON log lines`);
  return origin;
}

async function runGateway(engine: Engine, work: string, names: Names, secret: string, emulator: string): Promise<{ outputs: Array<[string, string]> }> {
  const port = await freePort();
  const config = join(work, 'gateway.yaml');
  writeFileSync(
    config,
    configYaml(
      {
        gateway: { name: 'container-check', status_interval: 0 },
        service: {
          base_url: `${emulator}/tracking/v1`,
          auth_url: emulator,
          organisation_id: DEMO_ORGANISATION_ID,
          auth: { mode: 'client_credentials', client_id: DEMO_CLIENT_ID, client_secret: { env: 'GATEWAY_CLIENT_SECRET' } },
        },
        uplink: { flush_interval: '200ms' },
        http: { host: '127.0.0.1', port },
        generator: [{ name: 'container-check', variables: { prefix: 'mvr_gen_', count: 3 }, interval: '200ms' }],
      },
      { header: ['Written by scripts/container-check: the configuration mounted into the container.', 'No paths: the defaults (./data, ./data/buffer.db) must land on the data volume.'] },
    ),
  );
  chmodSync(config, 0o444);
  const secretFile = join(work, 'client_secret');
  writeFileSync(secretFile, `${secret}\n`, { mode: 0o400 });
  chownSync(secretFile, GATEWAY_UID, GATEWAY_UID);
  // The container shares the host's network so it reaches the emulator's published port on the
  // loopback; the HTTP port is a free one, so the health URL follows it (the documented -e).
  const common = [
    '--pull=never', '--network', 'host',
    '-v', `${config}:/etc/edge-gateway/gateway.yaml:ro`,
    '-v', `${secretFile}:/run/secrets/client_secret:ro`,
    '-e', 'GATEWAY_CLIENT_SECRET_FILE=/run/secrets/client_secret',
    '-e', `GATEWAY_HEALTH_URL=http://127.0.0.1:${port}/healthz`,
  ];
  log(`mounted: /etc/edge-gateway/gateway.yaml (read-only), /run/secrets/client_secret (GATEWAY_CLIENT_SECRET_FILE, owner ${GATEWAY_UID}, mode 0400); http.port ${port}`);
  const outputs: Array<[string, string]> = [];

  const checked = await engine.podman(['run', '--rm', ...common, IMAGE, 'check'], { timeoutMs: 120_000 });
  outputs.push(['`check` output', checked.stdout + checked.stderr]);
  if (checked.code !== 0) throw new CheckFailure(`\`podman run IMAGE check\` failed (exit ${checked.code}):\n${checked.stdout}\n${checked.stderr}`);
  log('`check` (CMD replaced) validates the mounted config: exit 0');

  await engine.podman(['volume', 'create', names.volume], { check: 'volume create' });
  const startedAt = Date.now();
  await engine.podman(['run', '-d', '--name', names.gateway, ...common, '-v', `${names.volume}:/var/lib/edge-gateway`, IMAGE], { check: 'starting the gateway container' });
  const running = async () => {
    const st = (await engine.podman(['inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}', names.gateway])).stdout.trim();
    if (!st.startsWith('running')) {
      const logs = await engine.podman(['logs', '--tail', '30', names.gateway]);
      throw new CheckFailure(`the gateway container is ${st}; its last lines:\n${logs.stdout}${logs.stderr}`);
    }
  };

  // No systemd schedules health checks here: run the image's HEALTHCHECK the way its timer would.
  let attempts = 0;
  await poll('`podman healthcheck run` reports healthy', 120_000, async () => {
    await running();
    attempts++;
    const r = await engine.podman(['healthcheck', 'run', names.gateway], { timeoutMs: 30_000 });
    if (r.code === 0) return true;
    throw new Error(`${r.stdout.trim()} ${r.stderr.trim()}`.trim() || `exit ${r.code}`);
  });
  const health = (await engine.podman(['inspect', '--format', '{{.State.Health.Status}}', names.gateway])).stdout.trim();
  if (health !== 'healthy') throw new CheckFailure(`podman inspect shows health "${health}" after a passing health check`);
  log(`health check: ${health} after ${seconds(Date.now() - startedAt)} (podman healthcheck run, attempt ${attempts})`);

  // PID 1 is tini and everything runs as the image's user.
  const ids = await engine.podman(
    ['exec', names.gateway, '/bin/sh', '-c', 'for p in /proc/[0-9]*; do [ -r $p/cmdline ] || continue; printf "%s %s %s\\n" "${p#/proc/}" "$(awk \'/^Uid:/{print $2}\' $p/status)" "$(tr "\\0" " " < $p/cmdline)"; done'],
    { check: 'process list inside the container' },
  );
  const procs = ids.stdout.trim().split('\n').map((l) => l.split(' ')).map(([pid, uid, ...cmd]) => ({ pid, uid, cmd: cmd.join(' ').trim() }));
  const init = procs.find((p) => p.pid === '1');
  const node = procs.find((p) => p.cmd.startsWith('node /app/dist/cli.js run'));
  if (!init?.cmd.startsWith('/usr/bin/tini')) throw new CheckFailure(`PID 1 is "${init?.cmd}", not tini`);
  if (!node) throw new CheckFailure(`no "node /app/dist/cli.js run" process:\n${ids.stdout}`);
  const notGateway = procs.filter((p) => p.cmd !== '' && p.uid !== String(GATEWAY_UID));
  if (notGateway.length) throw new CheckFailure(`processes not running as uid ${GATEWAY_UID}: ${notGateway.map((p) => `${p.cmd} (uid ${p.uid})`).join(', ')}`);
  log(`runs as uid ${GATEWAY_UID} under tini: PID 1 ${init.cmd.split(' ')[0]}, node is PID ${node.pid}`);

  const stored = await poll('samples reach the emulator', 90_000, async () => {
    await running();
    const stats = JSON.parse((await get(`${emulator}/_emulator/stats`)).text) as { values_stored: number };
    return stats.values_stored > 0 ? stats.values_stored : undefined;
  });
  log(`samples reached the emulator: ${stored} values stored`);

  // `docker exec <container> edge-gateway status`: the URL comes from the mounted config.
  const status = await engine.podman(['exec', names.gateway, 'edge-gateway', 'status'], { timeoutMs: 60_000 });
  outputs.push(['`status` output', status.stdout + status.stderr]);
  if (status.code !== 0 || !status.stdout.includes('container-check')) throw new CheckFailure(`\`edge-gateway status\` inside the container failed (exit ${status.code}):\n${status.stdout}\n${status.stderr}`);
  log('`edge-gateway status` inside: exit 0');

  const http = `http://127.0.0.1:${port}`;
  outputs.push(['/status', (await get(`${http}/status`)).text], ['/metrics', (await get(`${http}/metrics`)).text]);
  const env = await engine.podman(['exec', names.gateway, 'env']);
  outputs.push(['the container\'s environment', env.stdout]);
  const inspect = await engine.podman(['inspect', names.gateway]);
  outputs.push(['podman inspect of the container', inspect.stdout]);

  // docker stop: SIGTERM to PID 1 (tini passes it on), SIGKILL after 10 s.
  const stopAt = Date.now();
  await engine.podman(['stop', '-t', String(STOP_DEADLINE_MS / 1000), names.gateway], { check: 'podman stop', timeoutMs: 60_000 });
  const stopMs = Date.now() - stopAt;
  const exit = (await engine.podman(['inspect', '--format', '{{.State.ExitCode}}', names.gateway])).stdout.trim();
  const logs = await engine.podman(['logs', names.gateway]);
  outputs.push(['the gateway container\'s log', logs.stdout + logs.stderr]);
  if (exit !== '0') throw new CheckFailure(`podman stop: the gateway exited with ${exit} after ${seconds(stopMs)}, not 0 (137 = killed after the 10 s grace); last lines:\n${(logs.stdout + logs.stderr).trim().split('\n').slice(-15).join('\n')}`);
  if (stopMs >= STOP_DEADLINE_MS) throw new CheckFailure(`podman stop took ${seconds(stopMs)}: not within ${seconds(STOP_DEADLINE_MS)}`);
  log(`podman stop: exited 0 in ${seconds(stopMs)}`);

  const mount = (await engine.podman(['volume', 'inspect', '--format', '{{.Mountpoint}}', names.volume], { check: 'volume inspect' })).stdout.trim();
  const db = (readdirSync(mount, { recursive: true, encoding: 'utf8' }) as string[]).find((f) => f.endsWith('.db'));
  if (!db) throw new CheckFailure(`no buffer database on the data volume (${mount}): the samples would be lost with the container`);
  const owner = statSync(join(mount, db)).uid;
  if (owner !== GATEWAY_UID) throw new CheckFailure(`/var/lib/edge-gateway/${db} belongs to uid ${owner}, not ${GATEWAY_UID}`);
  log(`buffer on the data volume: /var/lib/edge-gateway/${db}, owned by uid ${GATEWAY_UID}`);
  return { outputs };
}

export async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { 'work-dir': { type: 'string' }, keep: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, strict: true }));
  } catch (err) {
    process.stderr.write(`container-check: ${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    log(USAGE);
    return 0;
  }
  const reason = cannotRunReason();
  if (reason) {
    process.stderr.write(`container-check: cannot run here: ${reason}\n`);
    return 3;
  }
  const dir = resolve(values['work-dir'] ?? DEFAULT_WORK_DIR);
  mkdirSync(dir, { recursive: true });
  const started = Date.now();
  const id = randomBytes(4).toString('hex');
  const work = join(dir, `run-${id}`);
  mkdirSync(work, { recursive: true });
  chmodSync(work, 0o755);
  const engine = openEngine(dir, join(work, 'engine.log'));
  const names: Names = { emulator: `egcheck-${id}-emulator`, gateway: `egcheck-${id}-gateway`, volume: `egcheck-${id}-data` };
  let unlock: (() => void) | undefined;
  let code = 1;
  const cleanup = async () => {
    if (values.keep) {
      log(`kept: containers ${names.emulator}, ${names.gateway}, volume ${names.volume}, image ${IMAGE}, files ${work}`);
      return;
    }
    await engine.podman(['rm', '-f', '-t', '0', names.gateway, names.emulator]);
    await engine.podman(['volume', 'rm', '-f', names.volume]);
    // The image and its build stage stay tagged: they are the layer cache of the next run. What no
    // tag uses any more (the previous run's image) goes.
    await engine.podman(['image', 'prune', '-f']);
  };
  stopping = async () => {
    await cleanup().catch(() => undefined);
    unlock?.();
  };
  try {
    unlock = await lock(dir);
    const versions = await engine.run(['sh', '-c', 'buildah --version; podman --version; runc --version | head -1']);
    log(`container-check in ${dir} (log: ${engine.logFile})\n  ${versions.stdout.trim().split('\n').join('\n  ')}`);
    await ensureBaseImage(engine, log);
    const root = await npmRoot(engine);
    const secret = `cc-${randomBytes(12).toString('hex')}`;

    const buildAt = Date.now();
    log(`build: buildah bud --format docker --pull=never (FROM ${BASE_IMAGE} stand-in), npm trusting this machine's CAs via ${root} mounted as /root`);
    // The last run's image loses its tag first, so a failed build cannot leave it to be checked.
    await engine.podman(['untag', IMAGE]);
    let steps = 0;
    let reused = 0;
    const bud = (extra: string[], tag: string) =>
      engine.buildah(['bud', '--isolation', 'chroot', '--format', 'docker', '--pull=never', '--layers', '--force-rm', '--volume', `${root}:/root`, '-f', join(REPO, 'Dockerfile'), ...extra, '-t', tag, REPO], {
        nice: true,
        check: 'buildah bud of the Dockerfile',
        timeoutMs: 40 * 60_000,
        echo: (line) => {
          // "[1/2] STEP 3/9: RUN ..." in a multi-stage build; "STEP 3/9: RUN ..." with --target of the first stage.
          if (/^(\[\d+\/\d+\] )?STEP \d+\/\d+: (FROM|RUN|COMMIT)/.test(line)) log(`  ${line.length > 140 ? `${line.slice(0, 137)}...` : line}`);
          if (/STEP \d+\/\d+:/.test(line)) steps++;
          if (/^--> Using cache /.test(line)) reused++;
        },
      });
    // The build stage alone first (tagged, so its layers survive as the cache), then the image,
    // which finds that stage in the cache.
    await bud(['--target', 'build'], BUILD_STAGE_IMAGE);
    await bud([], IMAGE);
    log(`image built in ${seconds(Date.now() - buildAt)} (${steps} steps, ${reused} of them layers reused from the cache; storage ${engine.driver})`);

    await checkImage(engine);
    const history = await engine.podman(['history', '--no-trunc', '--format', '{{.CreatedBy}}', IMAGE], { check: 'image history' });
    const imageJson = await engine.podman(['image', 'inspect', IMAGE], { check: 'image inspect' });
    if (/cafile|_authToken|npmrc/.test(history.stdout)) throw new CheckFailure(`npm settings in the image history:\n${history.stdout}`);

    const emulator = await startEmulatorContainer(engine, work, names, secret);
    const { outputs } = await runGateway(engine, work, names, secret, emulator);
    outputs.push(['the image history', history.stdout], ['podman image inspect', imageJson.stdout]);
    const leaks = outputs.filter(([, text]) => text.includes(secret)).map(([where]) => where);
    if (leaks.length) throw new CheckFailure(`the client secret appears in ${leaks.join(', ')}`);
    log(`the client secret is in none of: ${outputs.map(([w]) => w).join(', ')}`);

    const emuStop = Date.now();
    await engine.podman(['stop', '-t', '10', names.emulator], { check: 'podman stop of the emulator', timeoutMs: 60_000 });
    const emuExit = (await engine.podman(['inspect', '--format', '{{.State.ExitCode}}', names.emulator])).stdout.trim();
    if (emuExit !== '0') throw new CheckFailure(`the emulator container exited ${emuExit} on podman stop`);
    log(`emulator container stopped: exit 0 in ${seconds(Date.now() - emuStop)}`);
    log(`container check passed in ${seconds(Date.now() - started)}`);
    code = 0;
  } catch (err) {
    if (err instanceof CannotRunHere) {
      process.stderr.write(`container-check: cannot run here: ${err.message}\n`);
      code = 3;
    } else if (err instanceof CheckFailure) {
      process.stderr.write(`container-check: FAILED: ${err.message}\n(engine log: ${engine.logFile})\n`);
    } else {
      process.stderr.write(`container-check: FAILED: ${(err as Error).stack ?? String(err)}\n(engine log: ${engine.logFile})\n`);
    }
  } finally {
    stopping = undefined;
    await cleanup().catch(() => undefined);
    unlock?.();
    if (code === 0 && !values.keep) rmSync(work, { recursive: true, force: true });
  }
  return code;
}

let stopping: (() => Promise<void>) | undefined;

if (process.argv[1] && resolve(process.argv[1]) === import.meta.filename) {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      // Stopped from outside (a test timeout, Ctrl-C): remove the containers and release the lock.
      void (stopping?.() ?? Promise.resolve()).finally(() => process.exit(130));
    });
  }
  main(process.argv.slice(2)).then((code) => process.exit(code));
}
