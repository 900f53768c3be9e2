/**
 * A stand-in for `node:20-bookworm-slim`, built on this machine because no image registry can be
 * reached here: `debootstrap --variant=minbase bookworm` from the Debian archive apt already uses
 * (its sources are copied in, so `apt-get` in the Dockerfile's RUN steps reaches the same mirror),
 * this machine's Node 20 under /usr/local with npm and its C headers (the Dockerfile compiles
 * better-sqlite3 against `$(dirname $(dirname $(command -v node)))`, i.e. /usr/local, like the
 * official image), and a `node` user (uid 1000) as in the official image. It is committed with
 * buildah under the official name in the check's own storage, and used with --pull=never.
 *
 * Cache: the image carries a label with a hash of its inputs (this file, debootstrap's version, the
 * apt sources, the Node binary, npm and headers, and the ISO week so the Debian packages are
 * refreshed weekly). A later run on the same machine reuses it when the hash matches and rebuilds it
 * otherwise; a fresh machine always builds it (about a minute).
 */
import { createHash } from 'node:crypto';
import { cpSync, createReadStream, existsSync, mkdirSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { CannotRunHere, type Engine } from './engine.js';

export const BASE_IMAGE = 'docker.io/library/node:20-bookworm-slim';
const KEY_LABEL = 'edge-gateway.container-check.base-key';
const SUITE = 'bookworm';

interface HostNode {
  binary: string;
  version: string;
  npmDir: string;
  headers: string;
}

/** This machine's Node 20, npm and headers, or CannotRunHere naming what is missing. */
export function hostNode(): HostNode {
  const which = spawnSync('sh', ['-c', 'command -v node'], { encoding: 'utf8' }).stdout.trim();
  if (!which) throw new CannotRunHere('node is not on the PATH');
  const binary = realpathSync(which);
  const version = spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout.trim();
  if (!/^v20\./.test(version)) throw new CannotRunHere(`the stand-in for node:20-bookworm-slim needs this machine's Node 20; found ${version}`);
  const prefix = dirname(dirname(binary));
  const npmDir = [join(prefix, 'lib', 'node_modules', 'npm'), '/usr/lib/node_modules/npm', '/usr/share/nodejs/npm'].find((d) => existsSync(join(d, 'bin', 'npm-cli.js')));
  if (!npmDir) throw new CannotRunHere(`npm not found next to ${binary}`);
  const headers = [join(prefix, 'include', 'node'), '/usr/include/node'].find((d) => existsSync(join(d, 'node_api.h')));
  if (!headers) throw new CannotRunHere(`Node's C headers (include/node/node_api.h) not found next to ${binary}: better-sqlite3 is compiled against them`);
  return { binary, version, npmDir, headers };
}

/** apt sources of this machine for Debian (deb822 debian.sources or the classic sources.list lines). */
function aptSources(): { file: string; text: string } {
  const deb822 = '/etc/apt/sources.list.d/debian.sources';
  if (existsSync(deb822)) return { file: 'sources.list.d/debian.sources', text: readFileSync(deb822, 'utf8') };
  const classic = existsSync('/etc/apt/sources.list') ? readFileSync('/etc/apt/sources.list', 'utf8') : '';
  const lines = classic.split('\n').filter((l) => /^deb\s.*debian/.test(l.trim()));
  return { file: 'sources.list', text: lines.length ? `${lines.join('\n')}\n` : `deb http://deb.debian.org/debian ${SUITE} main\n` };
}

/** The mirror debootstrap uses: the first Debian URI of the machine's apt sources. */
function mirrorOf(sources: string): string {
  const uri = /^URIs:\s*(\S+)/m.exec(sources)?.[1] ?? /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+/m.exec(sources)?.[1];
  return uri && !uri.includes('security') ? uri : 'http://deb.debian.org/debian';
}

function fileHash(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(path).on('data', (d) => h.update(d)).on('end', () => resolve(h.digest('hex'))).on('error', reject);
  });
}

function treeFingerprint(dir: string): string {
  const h = createHash('sha256');
  for (const f of (readdirSync(dir, { recursive: true, encoding: 'utf8' }) as string[]).sort()) {
    const st = statSync(join(dir, f), { throwIfNoEntry: false });
    h.update(`${f}\0${st?.size ?? -1}\0${st?.mtimeMs ?? 0}\n`);
  }
  return h.digest('hex');
}

function isoWeek(d = new Date()): string {
  const t = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
  t.setUTCDate(t.getUTCDate() + 4 - (t.getUTCDay() || 7));
  const year = t.getUTCFullYear();
  const week = Math.ceil(((t.getTime() - Date.UTC(year, 0, 1)) / 86_400_000 + 1) / 7);
  return `${year}-W${String(week).padStart(2, '0')}`;
}

async function inputsKey(node: HostNode, sources: string): Promise<string> {
  const h = createHash('sha256');
  h.update(readFileSync(import.meta.filename));
  h.update(spawnSync('dpkg-query', ['-W', '-f=${Version}', 'debootstrap'], { encoding: 'utf8' }).stdout);
  h.update(sources);
  h.update(await fileHash(node.binary));
  h.update(readFileSync(join(node.npmDir, 'package.json')));
  h.update(treeFingerprint(node.headers));
  h.update(isoWeek());
  return h.digest('hex').slice(0, 24);
}

/**
 * Makes sure the stand-in base image is in the engine's storage; builds it when missing or stale.
 * Returns how it was obtained, for the report.
 */
export async function ensureBaseImage(engine: Engine, log: (line: string) => void): Promise<'cached' | 'built'> {
  const node = hostNode();
  const sources = aptSources();
  const key = await inputsKey(node, sources.text);
  const existing = await engine.podman(['image', 'inspect', '--format', `{{index .Labels "${KEY_LABEL}"}}`, BASE_IMAGE]);
  if (existing.code === 0 && existing.stdout.trim() === key) {
    log(`base image: ${BASE_IMAGE} stand-in reused from the cache (inputs ${key})`);
    return 'cached';
  }

  const started = Date.now();
  const rootfs = join(engine.dir, 'base-rootfs');
  rmSync(rootfs, { recursive: true, force: true });
  const mirror = mirrorOf(sources.text);
  log(`base image: building the ${BASE_IMAGE} stand-in: debootstrap --variant=minbase ${SUITE} from ${mirror} + Node ${node.version} (inputs ${key})`);
  await engine.run(['debootstrap', '--variant=minbase', SUITE, rootfs, mirror], { nice: true, check: 'debootstrap of the base image', timeoutMs: 15 * 60_000 });

  // Node, npm and headers where the official image has them (/usr/local).
  const local = join(rootfs, 'usr', 'local');
  mkdirSync(join(local, 'bin'), { recursive: true });
  mkdirSync(join(local, 'lib', 'node_modules'), { recursive: true });
  mkdirSync(join(local, 'include'), { recursive: true });
  cpSync(node.binary, join(local, 'bin', 'node'), { preserveTimestamps: true });
  cpSync(node.npmDir, join(local, 'lib', 'node_modules', 'npm'), { recursive: true, verbatimSymlinks: true });
  cpSync(node.headers, join(local, 'include', 'node'), { recursive: true });
  symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(local, 'bin', 'npm'));
  symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', join(local, 'bin', 'npx'));
  // The official image's user.
  await engine.run(['chroot', rootfs, 'groupadd', '--gid', '1000', 'node'], { check: 'node group of the base image' });
  await engine.run(['chroot', rootfs, 'useradd', '--uid', '1000', '--gid', 'node', '--shell', '/bin/bash', '--create-home', 'node'], { check: 'node user of the base image' });
  // The same Debian archive as this machine's apt; no package lists or .debs left behind.
  rmSync(join(rootfs, 'etc', 'apt', 'sources.list'), { force: true });
  mkdirSync(join(rootfs, 'etc', 'apt', 'sources.list.d'), { recursive: true });
  writeFileSync(join(rootfs, 'etc', 'apt', sources.file), sources.text);
  // As Debian's official slim images (debuerreotype), which node:20-bookworm-slim builds on: apt
  // deletes downloaded .debs after installing (so `apt-get install tini` leaves no .deb in the
  // image) and dpkg leaves out documentation, manuals and translations.
  mkdirSync(join(rootfs, 'etc', 'apt', 'apt.conf.d'), { recursive: true });
  writeFileSync(
    join(rootfs, 'etc', 'apt', 'apt.conf.d', 'docker-clean'),
    [
      'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };',
      'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };',
      'Dir::Cache::pkgcache "";',
      'Dir::Cache::srcpkgcache "";',
      '',
    ].join('\n'),
  );
  writeFileSync(join(rootfs, 'etc', 'apt', 'apt.conf.d', 'docker-no-languages'), 'Acquire::Languages "none";\n');
  mkdirSync(join(rootfs, 'etc', 'dpkg', 'dpkg.cfg.d'), { recursive: true });
  writeFileSync(
    join(rootfs, 'etc', 'dpkg', 'dpkg.cfg.d', 'docker'),
    ['path-exclude /usr/share/doc/*', 'path-include /usr/share/doc/*/copyright', 'path-exclude /usr/share/groff/*', 'path-exclude /usr/share/info/*', 'path-exclude /usr/share/linda/*', 'path-exclude /usr/share/lintian/*', 'path-exclude /usr/share/locale/*', 'path-include /usr/share/locale/locale.alias', 'path-exclude /usr/share/man/*', ''].join('\n'),
  );
  await engine.run(
    ['chroot', rootfs, '/bin/sh', '-c', 'find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete; rm -rf /usr/share/man/* /usr/share/info/* /usr/share/groff/* /usr/share/lintian/*; find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +'],
    { check: 'slimming the base image' },
  );
  for (const d of ['var/lib/apt/lists', 'var/cache/apt/archives']) {
    for (const f of readdirSync(join(rootfs, d))) if (f !== 'partial' && f !== 'lock') rmSync(join(rootfs, d, f), { recursive: true, force: true });
  }
  const check = await engine.run(['chroot', rootfs, '/usr/local/bin/node', '-e', 'process.stdout.write(process.version)']);
  if (check.stdout.trim() !== node.version) throw new CannotRunHere(`this machine's node does not run inside a Debian ${SUITE} root file system (${check.stderr.trim() || check.stdout.trim()})`);

  const tar = join(engine.dir, 'base-rootfs.tar');
  await engine.run(['tar', '--numeric-owner', '-C', rootfs, '-cf', tar, '.'], { check: 'packing the base root file system' });
  const ctr = (await engine.buildah(['from', 'scratch'], { check: 'buildah from scratch' })).stdout.trim().split('\n').pop()!;
  try {
    await engine.buildah(['add', ctr, tar, '/'], { check: 'buildah add of the base root file system', nice: true });
    await engine.buildah(
      ['config', '--env', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', '--env', `NODE_VERSION=${node.version.slice(1)}`, '--cmd', 'node', '--label', `${KEY_LABEL}=${key}`, ctr],
      { check: 'buildah config of the base image' },
    );
    await engine.buildah(['commit', '--format', 'docker', '--rm', ctr, BASE_IMAGE], { check: 'buildah commit of the base image', nice: true });
  } catch (err) {
    await engine.buildah(['rm', ctr]);
    throw err;
  } finally {
    rmSync(tar, { force: true });
    rmSync(rootfs, { recursive: true, force: true });
  }
  log(`base image: built in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return 'built';
}
