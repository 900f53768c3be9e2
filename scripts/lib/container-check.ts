/**
 * scripts/container-check: what `docker build` and `docker run` would do with the Dockerfile,
 * performed without a container engine (none runs in CI), so a broken install step or a result
 * that does not start is caught. Steps:
 *
 *   1. read the Dockerfile; refuse instructions the check cannot perform, and check what the issue
 *      requires of the image (multi-stage, no compiler at runtime, non-root user, volume,
 *      HEALTHCHECK on /healthz, an init process, GATEWAY_CONFIG, the exposed port);
 *   2. perform every stage in a fresh temporary directory (scripts/lib/container-build.ts);
 *   3. start the result the way ENTRYPOINT + CMD say, as the image's user, with a mounted config
 *      and a client secret given as a *_FILE file, against an emulator of the tracking service;
 *   4. wait for the HEALTHCHECK command itself to pass, check /readyz, that samples reach the
 *      emulator, that `edge-gateway status` works inside, that the secret is in no output, then
 *      SIGTERM: the process must exit 0 within 10 s, with its buffer on the data volume.
 *
 * Exit code: 0 passed, 1 failed, 2 usage, 3 this machine cannot stand in for the base image.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join, posix, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { httpSchema } from '../../src/http/config.js';
import { DEMO_CLIENT_ID, DEMO_FIXTURE, DEMO_ORGANISATION_ID } from '../../src/emulator/demo-fixture.js';
import { DockerfileError, parseDockerfile, type Stage } from './dockerfile.js';
import {
  asIdentity,
  buildEnv,
  buildStages,
  CheckFailure,
  EnvironmentMismatch,
  hostPath,
  identityOf,
  killChildren,
  mappedEnv,
  spawnTracked,
  tail,
  waitExit,
  type BuiltStage,
  type Identity,
} from './container-build.js';

const REPO = resolve(import.meta.dirname, '..', '..');
/** The issue: SIGTERM → exit within 10 s. */
const STOP_DEADLINE_MS = 10_000;
const COMPILERS = ['gcc', 'g++', 'cpp', 'clang', 'make', 'build-essential', 'python3', 'python3-dev', 'node-gyp'];
const INITS = ['tini', 'dumb-init'];

const USAGE = `Usage: scripts/container-check [--dockerfile FILE] [--context DIR] [--build-only] [--keep]

Performs the Dockerfile's build steps in a fresh temporary directory without a container engine,
starts the result as ENTRYPOINT + CMD say (against an emulator of the tracking service), waits for
its HEALTHCHECK, checks /readyz and delivery, and stops it with SIGTERM. See docs/container.md.

  --dockerfile FILE  Dockerfile to check (default: Dockerfile of the repository)
  --context DIR      build context (default: the repository)
  --build-only       stop after the build steps and the static checks
  --keep             keep the temporary directory (it is printed) instead of removing it

Exit code: 0 passed, 1 failed, 2 usage, 3 this machine cannot stand in for the base image
(another Node major or Debian release).`;

const log = (line: string) => process.stdout.write(`${line}\n`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the issue asks of the image, checked on the Dockerfile itself (before the slow build). */
export function policyProblems(stages: Stage[], defaultHttpPort: number): string[] {
  const problems: string[] = [];
  const final = stages[stages.length - 1];
  if (stages.length < 2) problems.push('one stage only: native modules must be compiled in a build stage so the runtime image has no compiler');
  for (const s of stages) {
    if (!/^node:20(\.[\d.]+)?-[a-z]+-slim$/.test(s.image)) problems.push(`line ${s.line}: FROM ${s.image}: the image must be built on a Debian slim Node 20 image (node:20-<release>-slim)`);
  }
  const runs = final.steps.flatMap((s) => (s.kind === 'run' ? s.segments : []));
  const compilers = runs.flatMap((seg) => (seg.kind === 'apt-install' ? seg.packages.filter((p) => COMPILERS.includes(p)) : []));
  if (compilers.length) problems.push(`the runtime stage installs ${compilers.join(', ')}: compile in the build stage; the runtime must have no compiler`);
  const compiling = runs.find((seg) => seg.kind === 'shell' && /\b(npm (ci|install|i|rebuild)|node-gyp|prebuild-install)\b/.test(seg.text));
  if (compiling) problems.push(`the runtime stage runs "${compiling.text}": install and compile dependencies in the build stage and COPY --from it`);
  const users = final.steps.filter((s) => s.kind === 'user');
  const user = users.length ? (users[users.length - 1] as { user: string }).user : undefined;
  if (!user || user === 'root' || user === '0') problems.push('the runtime stage must end with USER <non-root user>');
  else if (!runs.some((seg) => seg.kind === 'useradd' && seg.name === user)) problems.push(`USER ${user}: the runtime stage does not create that user (useradd)`);
  if (!final.steps.some((s) => s.kind === 'volume')) problems.push('the runtime stage declares no VOLUME for the data directory');
  const env = new Map(final.steps.flatMap((s) => (s.kind === 'env' ? s.vars : [])));
  const health = final.steps.find((s) => s.kind === 'healthcheck');
  if (!health) problems.push('no HEALTHCHECK: the issue asks for one on /healthz');
  else {
    const cmd = 'shell' in health.check.command ? health.check.command.shell : health.check.command.exec.join(' ');
    // The URL may sit in an ENV the command reads (so `docker run -e` can change it).
    const referenced = [...env].filter(([k]) => cmd.includes(k)).map(([, v]) => v);
    if (![cmd, ...referenced].some((t) => t.includes('/healthz'))) problems.push(`line ${health.line}: HEALTHCHECK does not ask /healthz`);
    for (const t of [cmd, ...referenced]) {
      const m = /:\/\/(?:127\.0\.0\.1|localhost):(\d+)\/healthz/.exec(t);
      if (m && Number(m[1]) !== defaultHttpPort) problems.push(`line ${health.line}: HEALTHCHECK asks port ${m[1]}, but http.port defaults to ${defaultHttpPort}`);
    }
  }
  const entry = final.steps.filter((s) => s.kind === 'entrypoint').pop();
  if (!entry) problems.push('no ENTRYPOINT: the gateway must run under an init process (tini)');
  else if (!INITS.includes(basename(entry.argv[0]))) problems.push(`line ${entry.line}: ENTRYPOINT ${JSON.stringify(entry.argv)} does not start an init process (tini) that forwards SIGTERM and reaps children`);
  const cmd = final.steps.filter((s) => s.kind === 'cmd').pop();
  if (!cmd || cmd.argv[0] !== 'run') problems.push('CMD must be ["run"]: the image runs the gateway by default');
  if (!env.get('GATEWAY_CONFIG')?.startsWith('/')) problems.push('ENV GATEWAY_CONFIG=/path/of/the/mounted/config is missing: `run` without --config reads that file');
  const exposed = final.steps.flatMap((s) => (s.kind === 'expose' ? s.ports : []));
  if (!exposed.includes(defaultHttpPort)) problems.push(`EXPOSE ${defaultHttpPort} is missing (the default http.port)`);
  return problems;
}

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

async function poll<T>(what: string, deadlineMs: number, check: () => Promise<T | undefined>, abort?: () => string | undefined): Promise<T> {
  const end = Date.now() + deadlineMs;
  let last = '';
  for (;;) {
    const stop = abort?.();
    if (stop) throw new CheckFailure(`${what}: ${stop}`);
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > end) throw new CheckFailure(`${what}: not within ${seconds(deadlineMs)}${last ? ` (last: ${last})` : ''}`);
    await delay(500);
  }
}

/** Runs a short command (healthcheck, `edge-gateway status`, require checks) and collects its output. */
async function runShort(argv: string[], opts: { cwd: string; env: NodeJS.ProcessEnv; logFile: string; timeoutMs: number }): Promise<{ code: number | null; output: string }> {
  writeFileSync(opts.logFile, '');
  const child = spawnTracked(argv, { cwd: opts.cwd, env: opts.env, logFile: opts.logFile });
  const timer = setTimeout(() => {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }, opts.timeoutMs);
  const { code } = await waitExit(child);
  clearTimeout(timer);
  return { code, output: readFileSync(opts.logFile, 'utf8') };
}

/**
 * ENTRYPOINT as a command line of this machine: image files point into the rootfs, programs the
 * stage's apt-get lines installed are this machine's. An init the check could not install here (not
 * root) is left out, and node started directly, saying so.
 */
function mapEntrypoint(image: BuiltStage, argv: string[]): { argv: string[]; note: string } {
  const out: string[] = [];
  let note = '';
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('/')) {
      out.push(arg);
      continue;
    }
    if (existsSync(hostPath(image, arg))) {
      out.push(hostPath(image, arg));
      continue;
    }
    const owner = spawnSync('dpkg-query', ['-S', arg], { encoding: 'utf8' });
    const pkg = owner.status === 0 ? owner.stdout.split(':')[0].trim() : undefined;
    if (pkg && image.aptPackages.includes(pkg)) {
      out.push(arg);
      if (INITS.includes(basename(arg))) note = `${arg} (package ${pkg}, installed here) is the init process, as in the image`;
      continue;
    }
    const missing = image.aptMissing.find((p) => basename(arg) === p);
    if (missing && i === 0 && INITS.includes(missing)) {
      // Drop the init and its `--`.
      if (argv[i + 1] === '--') i++;
      note = `${arg} is not installed here (the check is not root): node is started directly, without the init process`;
      continue;
    }
    throw new CheckFailure(`ENTRYPOINT uses ${arg}, which is neither a file of the image nor installed by its apt-get lines`);
  }
  return { argv: out, note };
}

/** Loads every native module of the image as its user: catches a binary built for the wrong place. */
async function checkNativeModules(image: BuiltStage, appDir: string, ctx: { cwd: string; env: NodeJS.ProcessEnv; who: Identity; logDir: string }): Promise<void> {
  const modules = join(hostPath(image, appDir), 'node_modules');
  const dirs: string[] = [];
  for (const entry of existsSync(modules) ? readdirSync(modules) : []) {
    const candidates = entry.startsWith('@') ? readdirSync(join(modules, entry)).map((e) => join(modules, entry, e)) : [join(modules, entry)];
    for (const dir of candidates) if (existsSync(join(dir, 'binding.gyp'))) dirs.push(dir);
  }
  for (const dir of dirs) {
    const name = dir.slice(modules.length + 1);
    // better-sqlite3 loads its binary on first use, so open a database too.
    const code = `const m=require(process.argv[1]);if(${JSON.stringify(name)}==='better-sqlite3'){const d=new m(':memory:');d.prepare('select 1').get();d.close()}`;
    const r = await runShort(asIdentity(['node', '-e', code, dir], ctx.who), { cwd: ctx.cwd, env: ctx.env, logFile: join(ctx.logDir, `native-${basename(dir)}.log`), timeoutMs: 30_000 });
    if (r.code !== 0) throw new CheckFailure(`native module ${name} does not load in the runtime image:\n${r.output.trim()}`);
  }
  log(`native modules load as ${ctx.who.name}: ${dirs.map((d) => d.slice(modules.length + 1)).join(', ') || '(none)'}`);
}

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).map((f) => join(dir, f));
}

/** Step 3 and 4: start the image's result and check it the way an operator would. */
async function startAndCheck(image: BuiltStage, root: string, logDir: string): Promise<void> {
  if (!image.entrypoint || !image.cmd || !image.healthcheck) throw new CheckFailure('the image has no ENTRYPOINT, CMD or HEALTHCHECK to start and check');
  const who: Identity = image.user ? identityOf(image, image.user) : { name: 'root', uid: 0, gid: 0, groups: [], switched: false };
  log(
    who.switched
      ? `runs as ${who.name}: uid ${who.uid} gid ${who.gid}${who.groups.length ? ` groups ${who.groups.join(',')}` : ''} (setpriv), like USER ${who.name} in the image`
      : `runs as the current user (uid ${process.getuid?.()}), standing in for USER ${image.user ?? 'root'}: the check is not root, so it cannot switch`,
  );
  const script = image.entrypoint.concat(image.cmd).find((a) => a.endsWith('.js') && a.startsWith('/'));
  if (!script) throw new CheckFailure('ENTRYPOINT/CMD name no /path/to/cli.js to start the emulator from');
  const appDir = posix.dirname(posix.dirname(script));
  const secret = `cc-${randomBytes(12).toString('hex')}`;

  // The tracking service: the emulator of the built result, with a fixture whose client secret is
  // random, so finding it in any output proves a leak.
  const fixture = join(root, 'fixture.json');
  writeFileSync(fixture, JSON.stringify({ ...DEMO_FIXTURE, clients: DEMO_FIXTURE.clients.map((c) => ({ ...c, client_secret: secret })) }));
  const emuLog = join(logDir, 'emulator.log');
  const emulator = spawnTracked(['node', hostPath(image, script), 'emulator', '--port', '0', '--fixture', fixture], { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/' }, pipe: true });
  let emuOut = '';
  emulator.stdout?.on('data', (d) => {
    emuOut += d;
    writeFileSync(emuLog, emuOut);
  });
  emulator.stderr?.on('data', (d) => {
    emuOut += d;
    writeFileSync(emuLog, emuOut);
  });
  try {
    const baseUrl = await poll('the emulator prints its base URL', 30_000, async () => /base URL:\s+(\S+)/.exec(emuOut)?.[1], () => (emulator.exitCode !== null ? `it exited:\n${emuOut}` : undefined));
    const authUrl = /auth URL:\s+(\S+)/.exec(emuOut)?.[1] ?? new URL(baseUrl).origin;
    const emuOrigin = new URL(baseUrl).origin;
    log(`emulator of the tracking service: ${baseUrl}`);

    const port = await freePort();
    const configPath = image.env.get('GATEWAY_CONFIG') as string;
    const secretPath = '/run/secrets/client_secret';
    // The operator's side of `docker run`: the config mounted read-only at GATEWAY_CONFIG and the
    // secret as a file named by GATEWAY_CLIENT_SECRET_FILE (docker secret or -v ...:ro).
    mkdirSync(dirname(hostPath(image, configPath)), { recursive: true });
    writeFileSync(
      hostPath(image, configPath),
      [
        '# Written by scripts/container-check: the configuration "mounted" into the container.',
        'gateway:',
        '  name: container-check',
        '  status_interval: 0',
        'service:',
        `  base_url: ${baseUrl}`,
        `  auth_url: ${authUrl}`,
        `  organisation_id: ${DEMO_ORGANISATION_ID}`,
        '  auth:',
        '    mode: client_credentials',
        `    client_id: ${DEMO_CLIENT_ID}`,
        '    client_secret: { env: GATEWAY_CLIENT_SECRET }',
        'uplink:',
        '  flush_interval: 200ms',
        '# No paths: the defaults (./data, ./data/buffer.db) must land on the data volume.',
        'http:',
        '  host: 127.0.0.1',
        `  port: ${port}`,
        'generator:',
        '  - name: container-check',
        '    variables: { prefix: mvr_gen_, count: 3 }',
        '    interval: 200ms',
        '',
      ].join('\n'),
    );
    chmodSync(hostPath(image, configPath), 0o444);
    mkdirSync(dirname(hostPath(image, secretPath)), { recursive: true });
    writeFileSync(hostPath(image, secretPath), `${secret}\n`, { mode: 0o400 });
    if (who.switched) chownSync(hostPath(image, secretPath), who.uid, who.gid);

    const home = image.user ? (image.users.get(image.user)?.home ?? '/') : '/root';
    const { argv: entry, note } = mapEntrypoint(image, image.entrypoint);
    const env: NodeJS.ProcessEnv = {
      // The image's PATH: its own /usr/local/bin (edge-gateway), then this machine's node.
      PATH: `${hostPath(image, '/usr/local/bin')}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      HOME: hostPath(image, home),
      ...mappedEnv(image),
      GATEWAY_CLIENT_SECRET_FILE: hostPath(image, secretPath),
      // tini is PID 1 in a container; here it is not, so it registers as a subreaper instead.
      TINI_SUBREAPER: '1',
    };
    // The documented way to follow a changed http.port: docker run -e GATEWAY_HEALTH_URL=...
    if (image.env.has('GATEWAY_HEALTH_URL')) env.GATEWAY_HEALTH_URL = `http://127.0.0.1:${port}/healthz`;
    const cwd = hostPath(image, image.workdir);
    log(`mounted: ${configPath} (config, read-only), ${secretPath} (GATEWAY_CLIENT_SECRET_FILE); http.port ${port}`);

    await checkNativeModules(image, appDir, { cwd, env, who, logDir });

    // `docker run IMAGE check`: CMD replaced, config from GATEWAY_CONFIG.
    const checked = await runShort(asIdentity([...entry, 'check'], who), { cwd, env, logFile: join(logDir, 'check-command.log'), timeoutMs: 60_000 });
    if (checked.code !== 0) throw new CheckFailure(`"docker run IMAGE check" failed (exit ${checked.code}):\n${checked.output.trim()}`);
    log('`check` (CMD replaced) validates the mounted config: exit 0');

    const gatewayLog = join(logDir, 'gateway.log');
    const startArgv = asIdentity([...entry, ...image.cmd], who);
    log(`start: ${[...image.entrypoint, ...image.cmd].join(' ')} (in ${image.workdir})${note ? `\n  ${note}` : ''}`);
    const startedAt = Date.now();
    const gateway = spawnTracked(startArgv, { cwd, env, logFile: gatewayLog });
    const exited = () => (gateway.exitCode !== null || gateway.signalCode !== null ? `the gateway exited (${gateway.signalCode ?? gateway.exitCode}); last lines of ${gatewayLog}:\n${tail(gatewayLog)}` : undefined);
    try {
      // HEALTHCHECK, verbatim, as Docker runs it: the container's user, env and working directory.
      const hc = image.healthcheck;
      const hcArgv = asIdentity('shell' in hc.command ? ['/bin/sh', '-c', hc.command.shell] : hc.command.exec, who);
      let attempts = 0;
      await poll(`HEALTHCHECK (line ${image.healthcheckLine})`, hc.startPeriodMs + hc.intervalMs * hc.retries, async () => {
        attempts++;
        const r = await runShort(hcArgv, { cwd, env, logFile: join(logDir, 'healthcheck.log'), timeoutMs: hc.timeoutMs });
        if (r.code === 0) return true;
        throw new Error(`exit ${r.code}${r.output.trim() ? `: ${r.output.trim()}` : ''}`);
      }, exited);
      log(`HEALTHCHECK passed after ${seconds(Date.now() - startedAt)} (attempt ${attempts}, run verbatim)`);

      const http = `http://127.0.0.1:${port}`;
      await poll('/readyz answers 200', 30_000, async () => ((await get(`${http}/readyz`)).status === 200 ? true : undefined), exited);
      log('/readyz: 200');

      const stored = await poll('samples reach the emulator', 60_000, async () => {
        const stats = JSON.parse((await get(`${emuOrigin}/_emulator/stats`)).text) as { values_stored: number };
        return stats.values_stored > 0 ? stats.values_stored : undefined;
      }, exited);
      log(`samples reached the emulator: ${stored} values stored`);

      // `docker exec CONTAINER edge-gateway status`: through the image's PATH when it has the command.
      const statusArgv = existsSync(hostPath(image, '/usr/local/bin/edge-gateway')) ? ['edge-gateway'] : [...entry];
      const status = await runShort(asIdentity([...statusArgv, 'status', '--url', http], who), { cwd, env, logFile: join(logDir, 'status-command.log'), timeoutMs: 30_000 });
      if (status.code !== 0 || !status.output.includes('container-check')) throw new CheckFailure(`"${statusArgv[0]} status" inside the container failed (exit ${status.code}):\n${status.output.trim()}`);
      log(`\`${statusArgv[0]} status\` inside: exit 0`);

      const leaks = [
        ['/status', (await get(`${http}/status`)).text],
        ['/metrics', (await get(`${http}/metrics`)).text],
        ['`check` output', checked.output],
        ['`status` output', status.output],
        ['the gateway log', readFileSync(gatewayLog, 'utf8')],
      ].filter(([, text]) => text.includes(secret));
      if (leaks.length) throw new CheckFailure(`the client secret appears in ${leaks.map(([w]) => w).join(', ')}`);
      log('the client secret is in none of /status, /metrics, the logs, `check` and `status` output');

      // docker stop: SIGTERM to PID 1 (the init), which passes it on.
      const stopAt = Date.now();
      process.kill(gateway.pid as number, 'SIGTERM');
      const result = await Promise.race([waitExit(gateway), delay(STOP_DEADLINE_MS).then(() => null)]);
      if (!result) throw new CheckFailure(`SIGTERM: still running after ${seconds(STOP_DEADLINE_MS)} (docker stop would kill it); last lines of ${gatewayLog}:\n${tail(gatewayLog)}`);
      if (result.code !== 0) throw new CheckFailure(`SIGTERM: exited with ${result.signal ?? `code ${result.code}`} instead of 0; last lines of ${gatewayLog}:\n${tail(gatewayLog)}`);
      log(`SIGTERM: exited 0 in ${seconds(Date.now() - stopAt)}`);
    } finally {
      if (gateway.exitCode === null && gateway.signalCode === null && gateway.pid) process.kill(-gateway.pid, 'SIGKILL');
    }

    const volumeFiles = image.volumes.flatMap((v) => filesUnder(hostPath(image, v)).map((f) => ({ f, v })));
    const db = volumeFiles.find(({ f }) => f.endsWith('.db'));
    if (!db) throw new CheckFailure(`no buffer database on the volume (${image.volumes.join(', ')}): the samples would be lost with the container`);
    const owner = statSync(db.f).uid;
    if (who.switched && owner !== who.uid) throw new CheckFailure(`${db.f} belongs to uid ${owner}, not to ${who.name} (${who.uid})`);
    log(`buffer on the data volume: ${posix.join(db.v, db.f.slice(hostPath(image, db.v).length))}${who.switched ? `, owned by ${who.name}` : ''}`);
  } finally {
    if (emulator.exitCode === null && emulator.pid) {
      process.kill(emulator.pid, 'SIGTERM');
      await Promise.race([waitExit(emulator), delay(5_000)]);
    }
  }
}

/** The temporary directory of the running check, removed if the check is stopped by a signal. */
let workRoot: string | undefined;

export async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { dockerfile: { type: 'string' }, context: { type: 'string' }, 'build-only': { type: 'boolean' }, keep: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, strict: true }));
  } catch (err) {
    process.stderr.write(`container-check: ${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    log(USAGE);
    return 0;
  }
  const dockerfile = resolve(values.dockerfile ?? join(REPO, 'Dockerfile'));
  const context = resolve(values.context ?? REPO);
  const started = Date.now();
  const root = mkdtempSync(join(tmpdir(), 'edge-gateway-container-check-'));
  workRoot = root;
  // The image's user (another uid when the check is root) must reach its files below this folder.
  chmodSync(root, 0o755);
  const logDir = join(root, 'logs');
  mkdirSync(logDir);
  let code = 1;
  try {
    log(`container-check: ${dockerfile} (context ${context}) in ${root}`);
    const stages = parseDockerfile(readFileSync(dockerfile, 'utf8'));
    const defaultPort = httpSchema.parse({}).port;
    const problems = policyProblems(stages, defaultPort);
    if (problems.length) throw new CheckFailure(`the Dockerfile does not meet the container requirements:\n  ${problems.join('\n  ')}`);
    log(`static checks passed: ${stages.length} stages; the runtime has no compiler, a non-root USER, a VOLUME, HEALTHCHECK on /healthz, an init, GATEWAY_CONFIG, EXPOSE ${defaultPort}`);
    const built = await buildStages({ context, stages, root, logDir, log, nice: true });
    log(`build steps done in ${seconds(Date.now() - started)}`);
    if (!values['build-only']) await startAndCheck(built[built.length - 1], root, logDir);
    log(`container check passed in ${seconds(Date.now() - started)}`);
    code = 0;
  } catch (err) {
    if (err instanceof EnvironmentMismatch) {
      process.stderr.write(`container-check: cannot run here: ${err.message}\n`);
      code = 3;
    } else if (err instanceof CheckFailure || err instanceof DockerfileError) {
      process.stderr.write(`container-check: FAILED: ${err.message}\n`);
    } else {
      process.stderr.write(`container-check: FAILED: ${(err as Error).stack ?? String(err)}\n`);
    }
  } finally {
    killChildren();
    if (values.keep) log(`kept ${root}`);
    else rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  }
  return code;
}

if (process.argv[1] && resolve(process.argv[1]) === import.meta.filename) {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      // Stopped from outside (a test timeout, Ctrl-C): take the builds and processes down too.
      killChildren();
      if (workRoot && !process.argv.includes('--keep')) rmSync(workRoot, { recursive: true, force: true });
      process.exit(130);
    });
  }
  main(process.argv.slice(2)).then((code) => process.exit(code));
}
