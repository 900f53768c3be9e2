import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DockerfileError, dockerignoreMatcher, parseDockerfile, splitAndAnd, type Stage } from '../../scripts/lib/dockerfile.js';
import { policyProblems } from '../../scripts/lib/container-check.js';
import { minimalDockerfile as dockerfile, ROOT } from './helpers.js';

const REPO_DOCKERFILE = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');

function parseError(text: string): DockerfileError {
  try {
    parseDockerfile(text);
  } catch (err) {
    if (err instanceof DockerfileError) return err;
    throw err;
  }
  throw new Error('parsed without error');
}

const problems = (text: string) => policyProblems(parseDockerfile(text), 8080);
const runtime = (stages: Stage[]) => stages[stages.length - 1];

describe('the repository Dockerfile', () => {
  it('parses into a build stage and a runtime stage that meet the container requirements', () => {
    const stages = parseDockerfile(REPO_DOCKERFILE);
    expect(stages.map((s) => s.name ?? s.image)).toEqual(['build', 'node:20-bookworm-slim']);
    expect(policyProblems(stages, 8080)).toEqual([]);
    const segments = runtime(stages).steps.flatMap((s) => (s.kind === 'run' ? s.segments : []));
    expect(segments.map((s) => s.kind)).toEqual(['apt-update', 'apt-install', 'apt-clean', 'groupadd', 'useradd', 'mkdir', 'chown', 'symlink']);
    expect(segments.find((s) => s.kind === 'useradd')).toMatchObject({ name: 'gateway', uid: 10001, group: 'gateway', groups: ['dialout'], home: '/var/lib/edge-gateway' });
  });

  it('the minimal test Dockerfile meets them too (so the cases below fail for one reason each)', () => {
    expect(problems(dockerfile())).toEqual([]);
  });
});

describe('what the check refuses, naming the line', () => {
  it.each([
    ['ADD', 'FROM node:20-bookworm-slim\nADD x.tgz /app/', /line 2: instruction ADD is not understood/],
    ['ARG', 'FROM node:20-bookworm-slim\nARG VERSION', /line 2: instruction ARG is not understood/],
    ['SHELL', 'FROM node:20-bookworm-slim\nSHELL ["/bin/bash", "-c"]', /line 2: instruction SHELL/],
    ['an instruction before FROM', 'RUN true', /line 1: RUN before the first FROM/],
    ['RUN in exec form', 'FROM node:20-bookworm-slim\nRUN ["npm", "ci"]', /line 2: RUN in exec \(JSON\) form/],
    ['apt-get with ||', 'FROM node:20-bookworm-slim\nRUN apt-get install -y tini || true', /plain command joined to the others with &&/],
    ['apt-get without -y', 'FROM node:20-bookworm-slim\nRUN apt-get install tini', /apt-get install needs -y/],
    ['a pinned apt package', 'FROM node:20-bookworm-slim\nRUN apt-get install -y tini=0.19', /not a plain package name/],
    ['apt-get hidden in a shell command', 'FROM node:20-bookworm-slim\nRUN echo go; apt-get install -y tini', /apt-get changes the machine/],
    ['an absolute path in a verbatim command', 'FROM node:20-bookworm-slim\nRUN cp dist/cli.js /usr/local/bin/', /absolute path \/usr\/local\/bin\//],
    ['an unknown useradd option', 'FROM node:20-bookworm-slim\nRUN useradd --create-home x', /useradd option --create-home is not understood/],
    ['a COPY wildcard', 'FROM node:20-bookworm-slim\nCOPY *.json ./', /wildcards are not understood/],
    ['a COPY --chown', 'FROM node:20-bookworm-slim\nCOPY --chown=gateway src ./src', /COPY option --chown is not understood/],
    ['variable substitution', 'FROM node:20-bookworm-slim\nWORKDIR $HOME/app', /variable substitution is not understood/],
    ['ENTRYPOINT in shell form', 'FROM node:20-bookworm-slim\nENTRYPOINT node dist/cli.js', /exec \(JSON\) form: in shell form \/bin\/sh would receive/],
    ['HEALTHCHECK NONE', 'FROM node:20-bookworm-slim\nHEALTHCHECK NONE', /health check on \/healthz/],
  ])('%s', (_what, text, message) => {
    expect(parseError(text).message).toMatch(message);
  });

  it('continuation lines and comments inside them count from the instruction line', () => {
    const err = parseError('FROM node:20-bookworm-slim\n# comment\nRUN npm ci \\\n # inside\n && cp x /etc/x');
    expect(err.line).toBe(3);
  });
});

describe('what the issue requires of the image (static checks)', () => {
  it('one stage only', () => {
    expect(problems('FROM node:20-bookworm-slim\nUSER node')).toContainEqual(expect.stringMatching(/one stage only/));
  });
  it('a base image other than Debian slim Node 20', () => {
    expect(problems(dockerfile().replace('FROM node:20-bookworm-slim AS build', 'FROM node:22-bookworm AS build'))).toEqual([expect.stringMatching(/line 1: FROM node:22-bookworm: .*Debian slim Node 20/)]);
  });
  it('a compiler in the runtime stage', () => {
    const text = dockerfile().replace('--no-install-recommends tini', '--no-install-recommends tini g++ make');
    expect(problems(text)).toEqual([expect.stringMatching(/runtime stage installs g\+\+, make/)]);
  });
  it('npm ci in the runtime stage', () => {
    expect(problems(dockerfile({ runtime: 'RUN npm ci --omit=dev' }))).toEqual([expect.stringMatching(/runtime stage runs "npm ci --omit=dev"/)]);
  });
  it('running as root', () => {
    expect(problems(dockerfile().replace('USER gateway', 'USER root'))).toEqual([expect.stringMatching(/USER <non-root user>/)]);
  });
  it('no init process', () => {
    expect(problems(dockerfile({ entrypoint: '["node", "/app/dist/cli.js"]' }))).toEqual([expect.stringMatching(/does not start an init process/)]);
  });
  it('a health check on another path or port', () => {
    expect(problems(dockerfile().replace('8080/healthz', '8080/status'))).toEqual([expect.stringMatching(/HEALTHCHECK does not ask \/healthz/)]);
    expect(problems(dockerfile().replace('8080/healthz', '9090/healthz'))).toEqual([expect.stringMatching(/asks port 9090, but http.port defaults to 8080/)]);
  });
  it('no volume, no GATEWAY_CONFIG, another exposed port', () => {
    const text = dockerfile().replace('VOLUME ["/var/lib/edge-gateway"]\n', '').replace('ENV GATEWAY_CONFIG=/etc/edge-gateway/gateway.yaml\n', '').replace('EXPOSE 8080', 'EXPOSE 80');
    expect(problems(text)).toEqual([expect.stringMatching(/no VOLUME/), expect.stringMatching(/GATEWAY_CONFIG/), expect.stringMatching(/EXPOSE 8080 is missing/)]);
  });
});

describe('shell and .dockerignore reading', () => {
  it('splits RUN at top-level && only, keeping nested substitutions and quotes whole', () => {
    const parts = splitAndAnd('A="$(dirname "$(dirname "$(command -v node)")")" npm ci && echo "a && b" && x=\'&&\' y');
    expect(parts.map((p) => p.text)).toEqual(['A="$(dirname "$(dirname "$(command -v node)")")" npm ci', 'echo "a && b"', "x='&&' y"]);
    expect(parts.every((p) => !p.hasOperators)).toBe(true);
    expect(splitAndAnd('npm ci || cat log')[0].hasOperators).toBe(true);
  });

  it('applies .dockerignore patterns like docker build', () => {
    const ignored = dockerignoreMatcher('# comment\nnode_modules\n**/*.db\n.spike*\ndocs/*.tmp\n!docs/keep.tmp\n');
    expect(ignored('node_modules')).toBe(true);
    expect(ignored('node_modules/zod/index.js')).toBe(true);
    expect(ignored('src/node_modules.ts')).toBe(false);
    expect(ignored('buffer.db')).toBe(true);
    expect(ignored('config/data/buffer.db')).toBe(true);
    expect(ignored('.spike-mqtt/x.ts')).toBe(true);
    expect(ignored('docs/a.tmp')).toBe(true);
    expect(ignored('docs/keep.tmp')).toBe(false);
    expect(ignored('src/cli.ts')).toBe(false);
  });

  it('the repository .dockerignore keeps what the Dockerfile copies and drops local state', () => {
    const ignored = dockerignoreMatcher(readFileSync(join(ROOT, '.dockerignore'), 'utf8'));
    for (const kept of ['package.json', 'package-lock.json', 'tsconfig.json', 'src/cli.ts', 'config/demo.yaml']) expect(ignored(kept), kept).toBe(false);
    for (const dropped of ['node_modules/zod/package.json', 'dist/cli.js', 'data/demo/buffer.db', 'config/buffer.db', '.git/HEAD', 'test/docs.test.ts']) expect(ignored(dropped), dropped).toBe(true);
  });
});
