/**
 * Performs a Dockerfile's build steps on this machine, without a container engine: every stage
 * gets its own directory standing for the image's filesystem root (`rootfs`), WORKDIR and COPY
 * work inside it, RUN commands run with /bin/sh in the stage's working directory, and the commands
 * that would change the machine instead of the image (apt-get, useradd, mkdir of absolute paths ...)
 * are performed by this module in their container meaning (see `performSegment`).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, closeSync, cpSync, existsSync, lstatSync, mkdirSync, openSync, readFileSync, readdirSync, statSync, symlinkSync } from 'node:fs';
import { basename, join, posix, relative } from 'node:path';
import { dockerignoreMatcher, type HealthCheck, type RunSegment, type Stage } from './dockerfile.js';

/** The check found something wrong with the Dockerfile or its result. */
export class CheckFailure extends Error {}

/** This machine cannot stand in for the base image (other Node major or Debian release). */
export class EnvironmentMismatch extends Error {}

export interface UserEntry {
  uid?: number;
  group?: string;
  groups: string[];
  home?: string;
}

/** Who runs a process: the numeric ids used on this machine for a Dockerfile user. */
export interface Identity {
  name: string;
  uid: number;
  gid: number;
  /** Supplementary groups, as ids of this machine. */
  groups: number[];
  /** True when processes really run under these ids (the check runs as root and uses setpriv). */
  switched: boolean;
}

export interface BuiltStage {
  stage: Stage;
  label: string;
  rootfs: string;
  /** Current WORKDIR (a path inside the image). */
  workdir: string;
  env: Map<string, string>;
  user?: string;
  users: Map<string, UserEntry>;
  groups: Map<string, { gid?: number }>;
  volumes: string[];
  expose: number[];
  healthcheck?: HealthCheck;
  healthcheckLine?: number;
  entrypoint?: string[];
  cmd?: string[];
  /** Packages the stage's apt-get install lines name. */
  aptPackages: string[];
  /** Named packages that exist but are not installed here (the check is not root). */
  aptMissing: string[];
  /** Verbatim shell commands the stage ran. */
  shellCommands: string[];
}

export interface BuildOptions {
  context: string;
  stages: Stage[];
  /** Temporary root; each stage gets `<root>/<label>/rootfs`. */
  root: string;
  logDir: string;
  log: (line: string) => void;
  /** Run RUN commands with `nice` so tests running beside the check keep their timing. */
  nice?: boolean;
}

const isRoot = () => process.getuid?.() === 0;

// Children of the check, killed (with their process groups) when it stops early.
const children = new Set<ChildProcess>();

export function killChildren(signal: NodeJS.Signals = 'SIGKILL'): void {
  for (const child of children) {
    try {
      if (child.pid) process.kill(-child.pid, signal);
    } catch {
      try {
        child.kill(signal);
      } catch {
        /* already gone */
      }
    }
  }
}

/** Spawns a tracked child in its own process group; output goes to `logFile` when given. */
export function spawnTracked(argv: string[], options: { cwd?: string; env: NodeJS.ProcessEnv; logFile?: string; pipe?: boolean }): ChildProcess {
  const fd = options.logFile ? openSync(options.logFile, 'a') : undefined;
  const child = spawn(argv[0], argv.slice(1), {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: ['ignore', options.pipe ? 'pipe' : (fd ?? 'ignore'), options.pipe ? 'pipe' : (fd ?? 'ignore')],
  });
  if (fd !== undefined) closeSync(fd);
  children.add(child);
  child.on('exit', () => children.delete(child));
  child.on('error', () => children.delete(child));
  return child;
}

export function waitExit(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

export function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no output)';
  }
}

/** Wraps argv so it runs as `who` (setpriv when the check is root and the user is not). */
export function asIdentity(argv: string[], who: Identity | undefined): string[] {
  if (!who?.switched) return argv;
  return ['setpriv', `--reuid=${who.uid}`, `--regid=${who.gid}`, who.groups.length ? `--groups=${who.groups.join(',')}` : '--clear-groups', '--', ...argv];
}

/** A path inside the image, as a path on this machine. */
export function hostPath(stage: BuiltStage, imagePath: string): string {
  return join(stage.rootfs, posix.resolve('/', imagePath));
}

/**
 * ENV values as a process on this machine must see them: absolute paths (and `:`-lists of them)
 * point into the stage's rootfs, the way a mounted file appears at that path in a container.
 */
export function mappedEnv(stage: BuiltStage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of stage.env) {
    out[k] = /^\/[^/]/.test(v) ? v.split(':').map((p) => (p.startsWith('/') ? hostPath(stage, p) : p)).join(':') : v;
  }
  return out;
}

/** Host environment a RUN step may use: PATH and HOME (npm's cache), proxies, CA bundles, npm settings. */
export function buildEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue;
    if (['PATH', 'HOME', 'LANG', 'TMPDIR', 'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR'].includes(k) || /^(https?|no|all)_proxy$/i.test(k) || /^npm_config_/i.test(k)) out[k] = v;
  }
  // npm run scripts set npm_config_* for their children; a check started by `npm test` must not
  // hand those (the test runner's own npm settings) to the image's npm ci.
  for (const k of Object.keys(out)) if (/^npm_config_(argv|node_gyp|user_agent|local_prefix|prefix|globalconfig|init_module|userconfig|npm_version|noproxy)$/i.test(k)) delete out[k];
  return out;
}

function hostGroupId(name: string): number | undefined {
  const r = spawnSync('getent', ['group', name], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  return Number(r.stdout.split(':')[2]);
}

/** The ids a Dockerfile user runs under here: its fixed uid/gid when root, else the current user. */
export function identityOf(stage: BuiltStage, name: string): Identity {
  if (name === 'root' || name === '0') return { name, uid: 0, gid: 0, groups: [], switched: false };
  const user = stage.users.get(name);
  if (!user) throw new CheckFailure(`USER ${name}: no such user is created in stage ${stage.label} (useradd)`);
  if (!isRoot()) return { name, uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0, groups: [], switched: false };
  const gid = user.group ? (stage.groups.get(user.group)?.gid ?? hostGroupId(user.group) ?? 65534) : 65534;
  const groups = user.groups.map((g) => stage.groups.get(g)?.gid ?? hostGroupId(g)).filter((g): g is number => g !== undefined);
  return { name, uid: user.uid ?? 65534, gid, groups, switched: true };
}

function dpkgVersion(pkg: string): string | undefined {
  const r = spawnSync('dpkg-query', ['-W', '-f=${Status} ${Version}', pkg], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  const m = /install ok installed (\S+)/.exec(r.stdout);
  return m?.[1];
}

let aptUpdated = false;

/**
 * apt-get install: packages already installed here are reported with their version. A missing one
 * is installed for real when the check runs as root (so the started result uses it, as the image
 * would); otherwise `apt-get install --dry-run` proves it exists and is installable, and it is
 * reported as missing here. Never skipped silently.
 */
function aptInstall(built: BuiltStage, packages: string[], log: (l: string) => void): void {
  const missing: string[] = [];
  for (const p of packages) {
    built.aptPackages.push(p);
    const v = dpkgVersion(p);
    if (v) log(`    ${p}: installed here (${v})`);
    else missing.push(p);
  }
  if (missing.length === 0) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (isRoot()) {
    if (!aptUpdated) {
      log('    apt-get update (a package must be installed here)');
      const u = spawnSync('apt-get', ['update', '-qq'], { encoding: 'utf8', env });
      if (u.status !== 0) throw new CheckFailure(`apt-get update failed:\n${u.stderr}`);
      aptUpdated = true;
    }
    const r = spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { encoding: 'utf8', env });
    if (r.status !== 0) throw new CheckFailure(`apt-get install ${missing.join(' ')} failed (does the package exist in Debian ${debianCodename()}?):\n${r.stderr.trim() || r.stdout.trim()}`);
    for (const p of missing) log(`    ${p}: installed on this machine now (${dpkgVersion(p) ?? '?'}), as the image build would`);
    return;
  }
  for (const p of missing) {
    const r = spawnSync('apt-get', ['install', '--dry-run', '-qq', '--no-install-recommends', p], { encoding: 'utf8', env });
    if (r.status !== 0) throw new CheckFailure(`apt-get install ${p}: the package cannot be installed (does it exist in Debian ${debianCodename()}?):\n${r.stderr.trim() || r.stdout.trim()}`);
    built.aptMissing.push(p);
    log(`    ${p}: exists and is installable (dry run) but NOT installed here, and the check is not root; run scripts/install-test-deps`);
  }
}

export function debianCodename(): string {
  try {
    return /^VERSION_CODENAME=(.*)$/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1]?.replace(/"/g, '') ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function nodeMajorOnPath(): number {
  const r = spawnSync('node', ['-p', 'process.versions.node'], { encoding: 'utf8' });
  return Number(r.stdout.trim().split('.')[0]);
}

/**
 * The base image is played by this machine: its Node major and Debian release must be the image's,
 * or the check would vouch for a different platform.
 */
export function checkBaseImage(image: string): string {
  const m = /^node:(\d+)(?:\.[\d.]+)?-([a-z]+)(-slim)?$/.exec(image);
  if (!m) throw new CheckFailure(`FROM ${image}: the check can stand in only for node:<version>-<debian release>[-slim] images`);
  const [, major, codename] = m;
  const hostMajor = nodeMajorOnPath();
  const hostCodename = debianCodename();
  if (Number(major) !== hostMajor || codename !== hostCodename) {
    throw new EnvironmentMismatch(`FROM ${image} needs Node ${major} on Debian ${codename}; this machine has Node ${hostMajor} on Debian ${hostCodename}, so it cannot stand in for the image`);
  }
  return `Node ${hostMajor} and Debian ${hostCodename} of this machine stand in for the image`;
}

function copyStep(built: BuiltStage, all: BuiltStage[], step: { from?: string; sources: string[]; dest: string; line: number }, context: string, ignored: (rel: string) => boolean): string[] {
  const dest = posix.resolve(built.workdir, step.dest);
  const destIsDir = step.dest.endsWith('/') || step.sources.length > 1;
  const notes: string[] = [];
  for (const source of step.sources) {
    let from: string;
    let filter: ((src: string) => boolean) | undefined;
    if (step.from !== undefined) {
      const other = all.find((s) => s.stage.name === step.from || String(s.stage.index) === step.from);
      if (!other || other === built) throw new CheckFailure(`line ${step.line}: COPY --from=${step.from}: no earlier stage of that name`);
      from = hostPath(other, posix.resolve(other.workdir, source));
      if (!existsSync(from)) throw new CheckFailure(`line ${step.line}: COPY --from=${step.from} ${source}: not found in stage ${step.from} (${from})`);
    } else {
      const rel = posix.normalize(source).replace(/^\.\/?/, '').replace(/\/+$/, '');
      if (rel.startsWith('..') || rel.startsWith('/')) throw new CheckFailure(`line ${step.line}: COPY ${source}: outside the build context`);
      from = join(context, rel);
      if (rel !== '' && ignored(rel)) throw new CheckFailure(`line ${step.line}: COPY ${source}: excluded by .dockerignore, so docker build would not find it`);
      if (!existsSync(from)) throw new CheckFailure(`line ${step.line}: COPY ${source}: not found in the build context (${context})`);
      filter = (src) => {
        const r = relative(context, src).split('\\').join('/');
        return r === '' || !ignored(r);
      };
    }
    const isDir = statSync(from).isDirectory();
    const target = isDir ? hostPath(built, dest) : destIsDir || (existsSync(hostPath(built, dest)) && statSync(hostPath(built, dest)).isDirectory()) ? join(hostPath(built, dest), basename(from)) : hostPath(built, dest);
    mkdirSync(isDir ? target : join(target, '..'), { recursive: true });
    // A folder's contents are copied into the destination, as COPY does.
    cpSync(from, target, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true, force: true, ...(filter ? { filter } : {}) });
    notes.push(`${source} → ${isDir ? `${dest}/` : posix.join(dest, destIsDir ? basename(from) : '')}`.replace(/\/\/$/, '/'));
  }
  return notes;
}

function chownTree(path: string, uid: number, gid: number, recursive: boolean): void {
  chownSync(path, uid, gid);
  if (!recursive || !lstatSync(path).isDirectory()) return;
  for (const entry of readdirSync(path)) chownTree(join(path, entry), uid, gid, true);
}

/** Performs one handled RUN part (apt, users, absolute paths) in its container meaning. */
function performSegment(built: BuiltStage, seg: RunSegment, log: (l: string) => void): void {
  switch (seg.kind) {
    case 'apt-update':
      log('  apt-get update: performed only if a package below must be installed here');
      return;
    case 'apt-install':
      log(`  apt-get install ${seg.packages.join(' ')}:`);
      aptInstall(built, seg.packages, log);
      return;
    case 'apt-clean':
      log('  rm -rf /var/lib/apt/lists/*: trims the image; not done to this machine');
      return;
    case 'groupadd':
      if (built.groups.has(seg.name)) throw new CheckFailure(`groupadd ${seg.name}: the group already exists in this stage`);
      built.groups.set(seg.name, seg.gid !== undefined ? { gid: seg.gid } : {});
      log(`  groupadd ${seg.name}${seg.gid !== undefined ? ` (gid ${seg.gid})` : ''}: recorded for the image (this machine's groups are not changed)`);
      return;
    case 'useradd': {
      if (built.users.has(seg.name)) throw new CheckFailure(`useradd ${seg.name}: the user already exists in this stage`);
      if (seg.group && !built.groups.has(seg.group) && hostGroupId(seg.group) === undefined) throw new CheckFailure(`useradd ${seg.name} --gid ${seg.group}: no such group`);
      for (const g of seg.groups) if (!built.groups.has(g) && hostGroupId(g) === undefined) throw new CheckFailure(`useradd ${seg.name} --groups ${g}: no such group in the base image`);
      built.users.set(seg.name, { ...(seg.uid !== undefined ? { uid: seg.uid } : {}), ...(seg.group ? { group: seg.group } : {}), groups: seg.groups, ...(seg.home ? { home: seg.home } : {}) });
      log(`  useradd ${seg.name}${seg.uid !== undefined ? ` (uid ${seg.uid})` : ''}${seg.groups.length ? `, groups ${seg.groups.join(',')}` : ''}: recorded for the image (this machine's users are not changed)`);
      return;
    }
    case 'mkdir':
      for (const p of seg.paths) mkdirSync(hostPath(built, p), { recursive: true });
      log(`  mkdir -p ${seg.paths.join(' ')}: created in the stage's rootfs`);
      return;
    case 'chown': {
      const who = identityOf(built, seg.user);
      const gid = seg.group ? (built.groups.get(seg.group)?.gid ?? hostGroupId(seg.group) ?? who.gid) : who.gid;
      for (const p of seg.paths) {
        const target = hostPath(built, p);
        if (!existsSync(target)) throw new CheckFailure(`chown ${seg.user} ${p}: no such file or folder in the image`);
        if (who.switched) chownTree(target, who.uid, gid, seg.recursive);
      }
      log(`  chown ${seg.user}${seg.group ? `:${seg.group}` : ''} ${seg.paths.join(' ')}: ${who.switched ? `owner set to uid ${who.uid} gid ${gid}` : 'not root: stays owned by the current user, who stands in for it'}`);
      return;
    }
    case 'symlink': {
      const link = hostPath(built, seg.link);
      if (!existsSync(hostPath(built, seg.target))) throw new CheckFailure(`ln -s ${seg.target} ${seg.link}: ${seg.target} does not exist in the image`);
      mkdirSync(join(link, '..'), { recursive: true });
      symlinkSync(hostPath(built, seg.target), link);
      log(`  ln -s ${seg.target} ${seg.link}: created in the stage's rootfs`);
      return;
    }
    case 'shell':
      throw new Error('shell parts are run by runShell');
  }
}

async function runShell(built: BuiltStage, commands: string[], line: number, opts: BuildOptions): Promise<void> {
  const text = commands.join(' && ');
  const logFile = join(opts.logDir, `${built.label}-line${line}.log`);
  const cwd = hostPath(built, built.workdir);
  mkdirSync(cwd, { recursive: true });
  const who = built.user ? identityOf(built, built.user) : undefined;
  // Docker runs shell-form RUN with /bin/sh -c (dash on Debian), so bashisms fail here as there.
  const argv = asIdentity([...(opts.nice ? ['nice', '-n', '10'] : []), '/bin/sh', '-c', text], who);
  const started = Date.now();
  opts.log(`  /bin/sh -c '${text}' (in ${built.workdir}; output: ${logFile})`);
  const child = spawnTracked(argv, { cwd, env: { ...buildEnv(), ...mappedEnv(built) }, logFile });
  const { code, signal } = await waitExit(child);
  if (code !== 0) throw new CheckFailure(`line ${line}: RUN ${text} failed (${signal ?? `exit ${code}`}); last lines of ${logFile}:\n${tail(logFile)}`);
  built.shellCommands.push(...commands);
  opts.log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** Performs every stage of the Dockerfile; returns them in order (the last one is the image). */
export async function buildStages(opts: BuildOptions): Promise<BuiltStage[]> {
  const ignoreFile = join(opts.context, '.dockerignore');
  const ignored = dockerignoreMatcher(existsSync(ignoreFile) ? readFileSync(ignoreFile, 'utf8') : '');
  const built: BuiltStage[] = [];
  for (const stage of opts.stages) {
    const label = stage.name ?? `stage${stage.index}`;
    const b: BuiltStage = { stage, label, rootfs: join(opts.root, label, 'rootfs'), workdir: '/', env: new Map(), users: new Map(), groups: new Map(), volumes: [], expose: [], aptPackages: [], aptMissing: [], shellCommands: [] };
    mkdirSync(b.rootfs, { recursive: true });
    built.push(b);
    opts.log(`[${label}] FROM ${stage.image}: ${checkBaseImage(stage.image)}; rootfs ${b.rootfs}`);
    for (const step of stage.steps) {
      const at = `[${label}] line ${step.line}:`;
      switch (step.kind) {
        case 'workdir':
          b.workdir = posix.resolve(b.workdir, step.path);
          mkdirSync(hostPath(b, b.workdir), { recursive: true });
          opts.log(`${at} WORKDIR ${b.workdir}`);
          break;
        case 'copy': {
          const notes = copyStep(b, built, step, opts.context, ignored);
          opts.log(`${at} COPY${step.from !== undefined ? ` --from=${step.from}` : ''} ${notes.join(', ')}`);
          break;
        }
        case 'env':
          for (const [k, v] of step.vars) b.env.set(k, v);
          opts.log(`${at} ENV ${step.vars.map(([k, v]) => `${k}=${v}`).join(' ')}`);
          break;
        case 'user':
          identityOf(b, step.user);
          b.user = step.user;
          opts.log(`${at} USER ${step.user}`);
          break;
        case 'volume':
          for (const p of step.paths) {
            b.volumes.push(p);
            mkdirSync(hostPath(b, p), { recursive: true });
          }
          opts.log(`${at} VOLUME ${step.paths.join(' ')}: recorded (its folder in the rootfs plays the volume)`);
          break;
        case 'expose':
          b.expose.push(...step.ports);
          opts.log(`${at} EXPOSE ${step.ports.join(' ')}: recorded`);
          break;
        case 'healthcheck':
          b.healthcheck = step.check;
          b.healthcheckLine = step.line;
          opts.log(`${at} HEALTHCHECK recorded (run verbatim once the result is started)`);
          break;
        case 'entrypoint':
          b.entrypoint = step.argv;
          opts.log(`${at} ENTRYPOINT ${JSON.stringify(step.argv)}: recorded`);
          break;
        case 'cmd':
          b.cmd = step.argv;
          opts.log(`${at} CMD ${JSON.stringify(step.argv)}: recorded`);
          break;
        case 'run': {
          opts.log(`${at} RUN`);
          // Consecutive verbatim parts run in one shell, so they share its state as in the image.
          let pending: string[] = [];
          for (const seg of step.segments) {
            if (seg.kind === 'shell') {
              pending.push(seg.text);
              continue;
            }
            if (pending.length) await runShell(b, pending, step.line, opts);
            pending = [];
            performSegment(b, seg, opts.log);
          }
          if (pending.length) await runShell(b, pending, step.line, opts);
          break;
        }
      }
    }
  }
  return built;
}
