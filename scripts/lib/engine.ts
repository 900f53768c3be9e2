/**
 * The container engine of scripts/container-check: Debian's buildah and podman, run as root with
 * their own storage in the work folder (the kernel's overlay driver where it works, else vfs, which
 * works on any file system but copies the whole root file system for every container and layer),
 * chroot isolation for RUN steps, and runc (crun fails on rlimits with the hybrid cgroups
 * found here). Everything goes through `run()` so each command is niced and logged.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export class CheckFailure extends Error {}
/** This machine cannot run the check (tools missing, not root): exit 3, the test skips outside CI. */
export class CannotRunHere extends Error {}

export const REQUIRED_TOOLS = ['buildah', 'podman', 'runc', 'debootstrap', 'conmon'] as const;

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface Engine {
  /** The work folder: storage, containers.conf, the npm folder mounted as the build's /root, logs. */
  dir: string;
  logFile: string;
  /** The storage driver in use (storageDriver). */
  driver: 'overlay' | 'vfs';
  buildah(args: string[], opts?: RunOptions): Promise<RunResult>;
  podman(args: string[], opts?: RunOptions): Promise<RunResult>;
  run(argv: string[], opts?: RunOptions): Promise<RunResult>;
}

export interface RunOptions {
  /** Kill after this long (the result has code null). */
  timeoutMs?: number;
  /** Throw CheckFailure (with the output's tail) on a non-zero exit. */
  check?: string;
  /** Run with `nice -n 10` (builds; the machine is shared). */
  nice?: boolean;
  /** Echo output lines with this prefix as they come (long builds). */
  echo?: (line: string) => void;
}

/** Missing tools, or not root: the reason the check cannot run here, or undefined. */
export function cannotRunReason(): string | undefined {
  const missing = REQUIRED_TOOLS.filter((t) => spawnSync('sh', ['-c', `command -v ${t}`], { encoding: 'utf8', env: withSbin(process.env) }).status !== 0);
  if (missing.length) return `${missing.join(', ')} not installed (scripts/install-test-deps installs them)`;
  if (process.getuid?.() !== 0) return 'not root: the check runs buildah and podman as root (chroot isolation, its own storage)';
  return undefined;
}

/** runc and debootstrap live in /usr/sbin, which a non-login PATH may lack. */
function withSbin(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const path = env.PATH ?? '/usr/bin:/bin';
  const extra = ['/usr/local/sbin', '/usr/sbin', '/sbin'].filter((d) => !path.split(':').includes(d));
  return { ...env, PATH: [path, ...extra].join(':') };
}

/**
 * containers.conf for this work folder: runc, and ulimits the engine may set. Podman and buildah
 * raise nofile/nproc to their own defaults unless told, which fails here ("setting RLIMIT_NOFILE ...
 * operation not permitted"); the current hard nofile limit and 32768 processes are allowed.
 */
function containersConf(): string {
  const hardNofile = spawnSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).stdout.trim();
  const nofile = /^\d+$/.test(hardNofile) ? Math.min(Number(hardNofile), 65_536) : 1024;
  return [
    '# Written by scripts/container-check (scripts/lib/engine.ts); used through CONTAINERS_CONF.',
    '[containers]',
    `default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=32768:32768"]`,
    '',
    '[engine]',
    'runtime = "runc"',
    // No systemd here: health checks are run with `podman healthcheck run`, not timers.
    'events_logger = "file"',
    '',
  ].join('\n');
}

/** statfs f_type of overlayfs: an overlay's upper layer cannot itself be on an overlay. */
const OVERLAYFS_MAGIC = 0x794c7630;

/**
 * The storage driver for `dir`: overlay when the kernel has it and `dir` is not on an overlay itself
 * (layers are then diffs, and a container is a mount, not a copy), else vfs.
 * EDGE_GATEWAY_CONTAINER_STORAGE=vfs|overlay forces one.
 */
export function storageDriver(dir: string): 'overlay' | 'vfs' {
  const forced = process.env.EDGE_GATEWAY_CONTAINER_STORAGE;
  if (forced === 'vfs' || forced === 'overlay') return forced;
  const kernelHasOverlay = existsSync('/proc/filesystems') && /\toverlay$/m.test(readFileSync('/proc/filesystems', 'utf8'));
  return kernelHasOverlay && statfsSync(dir).type !== OVERLAYFS_MAGIC ? 'overlay' : 'vfs';
}

export function openEngine(dir: string, logFile: string): Engine {
  mkdirSync(dir, { recursive: true });
  const conf = join(dir, 'containers.conf');
  writeFileSync(conf, containersConf());
  // Each driver its own folder: a storage folder is bound to the driver that created it.
  const driver = storageDriver(dir);
  // podman refuses an overlay run root longer than 50 characters: that one goes under /run, named
  // after the work folder.
  const root = join(dir, driver === 'vfs' ? 'storage' : `storage-${driver}`);
  const runroot = driver === 'vfs' ? join(dir, 'runroot') : `/run/egcc-${createHash('sha256').update(dir).digest('hex').slice(0, 12)}`;
  const storage = ['--root', root, '--runroot', runroot, '--storage-driver', driver];
  const env = withSbin({ ...process.env, CONTAINERS_CONF: conf, BUILDAH_ISOLATION: 'chroot', TMPDIR: join(dir, 'tmp') });
  mkdirSync(join(dir, 'tmp'), { recursive: true });

  const run = (argv: string[], opts: RunOptions = {}): Promise<RunResult> => {
    const full = opts.nice ? ['nice', '-n', '10', ...argv] : argv;
    appendFileSync(logFile, `\n$ ${full.join(' ')}\n`);
    const started = Date.now();
    return new Promise((resolve, reject) => {
      const child = spawn(full[0], full.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      let partial = '';
      const onData = (which: 'out' | 'err') => (d: Buffer) => {
        const text = d.toString();
        if (which === 'out') stdout += text;
        else stderr += text;
        appendFileSync(logFile, text);
        if (opts.echo) {
          partial += text;
          const lines = partial.split('\n');
          partial = lines.pop() ?? '';
          for (const l of lines) opts.echo(l);
        }
      };
      child.stdout.on('data', onData('out'));
      child.stderr.on('data', onData('err'));
      const timer = opts.timeoutMs ? setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs) : undefined;
      child.on('error', reject);
      child.on('close', (code) => {
        if (timer) clearTimeout(timer);
        const r = { code, stdout, stderr, ms: Date.now() - started };
        if (opts.check && code !== 0) {
          const output = `${stdout}\n${stderr}`.trim().split('\n').slice(-25).join('\n');
          reject(new CheckFailure(`${opts.check}: \`${argv.slice(0, 3).join(' ')} ...\` exited ${code ?? 'on timeout'}:\n${output}`));
        } else resolve(r);
      });
    });
  };

  return {
    dir,
    logFile,
    driver,
    run,
    buildah: (args, opts) => run(['buildah', ...storage, ...args], opts),
    podman: (args, opts) => run(['podman', ...storage, '--cgroup-manager', 'cgroupfs', ...args], opts),
  };
}

/** The storage folder exists from an earlier run (the base image may be cached there). */
export function hasStorage(dir: string): boolean {
  return existsSync(join(dir, 'storage')) || existsSync(join(dir, 'storage-overlay'));
}
