import { spawn } from 'node:child_process';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..');

/** Exit code of scripts/container-check when this machine cannot stand in for the base image. */
export const ENVIRONMENT_MISMATCH = 3;

/**
 * Runs scripts/container-check with `args` and collects its output. On timeout the script gets
 * SIGTERM, which makes it stop its builds and processes and remove its temporary directory.
 */
export function runContainerCheck(args: string[], timeoutMs: number): Promise<{ code: number | null; out: string; err: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(join(ROOT, 'scripts', 'container-check'), args, { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err, ms: Date.now() - started });
    });
  });
}

/** A minimal Dockerfile meeting every static requirement; `build` and `runtime` add lines to the stages. */
export function minimalDockerfile(parts: { build?: string; runtime?: string; entrypoint?: string } = {}): string {
  return `FROM node:20-bookworm-slim AS build
WORKDIR /app
${parts.build ?? 'RUN echo built > built.txt'}

FROM node:20-bookworm-slim
RUN apt-get update \\
 && apt-get install -y --no-install-recommends tini \\
 && rm -rf /var/lib/apt/lists/* \\
 && groupadd --system --gid 10001 gateway \\
 && useradd --system --uid 10001 --gid gateway --groups dialout --home-dir /var/lib/edge-gateway gateway \\
 && mkdir -p /var/lib/edge-gateway \\
 && chown gateway:gateway /var/lib/edge-gateway
WORKDIR /app
${parts.runtime ?? 'COPY --from=build /app/built.txt ./'}
ENV GATEWAY_CONFIG=/etc/edge-gateway/gateway.yaml
USER gateway
VOLUME ["/var/lib/edge-gateway"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s CMD node -e "fetch('http://127.0.0.1:8080/healthz')"
ENTRYPOINT ${parts.entrypoint ?? '["/usr/bin/tini", "--", "node", "/app/dist/cli.js"]'}
CMD ["run"]
`;
}
