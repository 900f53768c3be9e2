import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, type TestContext } from 'vitest';
import { ENVIRONMENT_MISMATCH, minimalDockerfile, runContainerCheck } from './helpers.js';

// scripts/container-check --build-only on small Dockerfiles (no npm ci): how it performs steps and
// how it fails. The whole Dockerfile is checked by dockerfile-steps.test.ts.

const cleanup: string[] = [];
afterEach(() => {
  for (const dir of cleanup.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A build context with `files` and the Dockerfile `text`. */
function context(text: string, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-container-ctx-'));
  cleanup.push(dir);
  writeFileSync(join(dir, 'Dockerfile'), text);
  for (const [name, body] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), body);
  }
  return dir;
}

async function check(ctx: TestContext, dir: string, extra: string[] = []) {
  const r = await runContainerCheck(['--build-only', '--dockerfile', join(dir, 'Dockerfile'), '--context', dir, ...extra], 120_000);
  if (r.code === ENVIRONMENT_MISMATCH && process.env.CI !== 'true') ctx.skip(`container check cannot run on this machine: ${r.err.trim()}`);
  const kept = /^kept (\S+)$/m.exec(r.out)?.[1];
  if (kept) cleanup.push(kept);
  return { ...r, kept };
}

describe('scripts/container-check build steps', () => {
  it('performs WORKDIR, COPY (context and --from), ENV and RUN the way docker build does, honouring .dockerignore', async (ctx) => {
    const dir = context(
      minimalDockerfile({
        build: ['COPY package.json ./', 'COPY src ./src', 'ENV GREETING=hello', 'RUN ls -A src > listing.txt && echo "$GREETING from $(pwd)" > greeting.txt'].join('\n'),
        runtime: ['COPY --from=build /app/listing.txt /app/greeting.txt ./out/', 'COPY --from=build /app/src ./copied-src', 'RUN ln -s /app/out/greeting.txt /usr/local/bin/greeting'].join('\n'),
      }),
      { 'package.json': '{}', 'src/a.ts': 'a', 'src/sub/b.ts': 'b', 'src/local.db': 'state', '.dockerignore': '**/*.db\n' },
    );
    const r = await check(ctx, dir, ['--keep']);
    expect(r.code, `${r.out}\n${r.err}`).toBe(0);
    expect(r.kept).toBeDefined();
    const app = join(r.kept as string, 'stage1', 'rootfs', 'app');
    // A folder's contents go into the destination; .dockerignore'd files never arrive.
    expect(readFileSync(join(app, 'out', 'listing.txt'), 'utf8').split('\n').filter(Boolean).sort()).toEqual(['a.ts', 'sub']);
    expect(readFileSync(join(app, 'copied-src', 'sub', 'b.ts'), 'utf8')).toBe('b');
    // RUN runs in the stage's WORKDIR (inside its rootfs) with the stage's ENV.
    expect(readFileSync(join(app, 'out', 'greeting.txt'), 'utf8')).toBe(`hello from ${join(r.kept as string, 'build', 'rootfs', 'app')}\n`);
    const link = join(r.kept as string, 'stage1', 'rootfs', 'usr', 'local', 'bin', 'greeting');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe(join(app, 'out', 'greeting.txt'));
    // The volume folder belongs to the image's user when the check can switch users.
    const volume = join(r.kept as string, 'stage1', 'rootfs', 'var', 'lib', 'edge-gateway');
    expect(existsSync(volume)).toBe(true);
    if (process.getuid?.() === 0) expect(statSync(volume).uid).toBe(10001);
    expect(r.out).toMatch(/tini: installed (here|on this machine now)|tini: exists and is installable/);
    expect(r.out).toContain('useradd gateway (uid 10001), groups dialout: recorded for the image');
  });

  it('a failing RUN fails the check, naming the line and showing the command output', async (ctx) => {
    const dir = context(minimalDockerfile({ build: 'RUN echo "about to fail" && false' }));
    const r = await check(ctx, dir);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/FAILED: line 3: RUN echo "about to fail" && false failed \(exit 1\)/);
    expect(r.err).toContain('about to fail');
  });

  it('RUN uses /bin/sh like docker build, so a bash-only command fails here as it would there', async (ctx) => {
    const dir = context(minimalDockerfile({ build: 'RUN [[ -n "x" ]]' }));
    const r = await check(ctx, dir);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/line 3: RUN \[\[ -n "x" \]\] failed/);
  });

  it('COPY of a file that .dockerignore excludes fails as docker build would', async (ctx) => {
    const dir = context(minimalDockerfile({ build: 'COPY gateway.local.yaml ./' }), { 'gateway.local.yaml': 'x: 1', '.dockerignore': '*.local.yaml\n' });
    const r = await check(ctx, dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain('line 3: COPY gateway.local.yaml: excluded by .dockerignore');
  });

  it('an unknown instruction fails before any step runs', async (ctx) => {
    const dir = context(minimalDockerfile({ build: 'RUN echo ran > ran.txt\nSTOPSIGNAL SIGINT' }));
    const r = await check(ctx, dir);
    expect(r.code).toBe(1);
    expect(r.err).toContain('Dockerfile line 4: instruction STOPSIGNAL is not understood');
    expect(r.out).not.toContain('/bin/sh -c');
  });

  it('an apt package that does not exist fails the check', async (ctx) => {
    const dir = context(minimalDockerfile({ build: 'RUN apt-get update && apt-get install -y --no-install-recommends edge-gateway-no-such-package' }));
    const r = await check(ctx, dir);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/apt-get install edge-gateway-no-such-package.*(failed|cannot be installed)/);
  });
});
