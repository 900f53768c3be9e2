import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
/** Exit code of scripts/container-check when this machine cannot run it (tools missing, not root). */
const CANNOT_RUN_HERE = 3;

// A real build (buildah) and run (podman) of the Dockerfile: about 3-4 minutes on 2 idle cores with
// the base image cached, a minute more on a fresh machine, longer while others work (the build runs
// niced). It runs under CI=true, where missing tools fail it; elsewhere it is skipped with a notice
// unless EDGE_GATEWAY_CONTAINER_CHECK=1 asks for it.
const TIMEOUT_MS = 25 * 60_000;
const wanted = process.env.CI === 'true' || process.env.EDGE_GATEWAY_CONTAINER_CHECK === '1';

function runContainerCheck(timeoutMs: number): Promise<{ code: number | null; out: string; err: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(join(ROOT, 'scripts', 'container-check'), [], { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    // On timeout the script gets SIGTERM: it removes its containers and releases its lock.
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err, ms: Date.now() - started });
    });
  });
}

describe('container image (scripts/container-check: buildah build, podman run)', () => {
  it(
    'builds the Dockerfile, runs the emulator and the gateway from the image, and checks health, delivery, status, secrets and stop',
    async (ctx) => {
      if (!wanted) {
        process.stdout.write('container image check skipped: it runs under CI=true (or EDGE_GATEWAY_CONTAINER_CHECK=1), or run scripts/container-check\n');
        ctx.skip();
        return;
      }
      const r = await runContainerCheck(TIMEOUT_MS - 30_000);
      const report = `${r.out}\n${r.err}`;
      // Under CI a machine without the tools fails here: .ci/run installs them (scripts/install-test-deps).
      expect(r.code, r.code === CANNOT_RUN_HERE ? `container-check cannot run on this machine:\n${report}` : report).toBe(0);
      // The script's own report of what it proved (each line is printed only after its check passed).
      for (const line of [
        'image built in',
        'image: USER gateway, HEALTHCHECK kept (docker format), ENTRYPOINT tini, CMD run',
        'no compiler in the runtime image',
        "nothing of the build's /root mount (CA bundle, .npmrc, npm cache) is in the image",
        'emulator from the image: `emulator --host 0.0.0.0` published on',
        'start-up text on stdout has no JSON log lines',
        '`check` (CMD replaced) validates the mounted config: exit 0',
        'health check: healthy',
        'runs as uid 10001 under tini',
        'samples reached the emulator',
        '`edge-gateway status` inside: exit 0',
        'the client secret is in none of: `check` output, `status` output, /status, /metrics, the container\'s environment, podman inspect of the container, the gateway container\'s log, the image history, podman image inspect',
        'podman stop: exited 0 in',
        'buffer on the data volume: /var/lib/edge-gateway/',
        'container check passed',
      ]) {
        expect(r.out, report).toContain(line);
      }
      process.stdout.write(`container check took ${(r.ms / 1000).toFixed(0)} s\n`);
    },
    TIMEOUT_MS,
  );
});
