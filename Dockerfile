# syntax=docker/dockerfile:1
# edge-gateway container image; guide: docs/container.md
#
# Two stages: native modules are compiled in the build stage (python3, make, g++); the runtime
# stage receives the compiled node_modules and dist/ and has no compiler.
#
# CI builds this file with buildah and runs the image with podman (scripts/container-check,
# test/container/image.test.ts): when you change it, run scripts/container-check.

FROM node:20-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# better-sqlite3 is compiled from source against this image's own Node headers (nodedir), so the
# build needs only the npm registry and the Debian mirror: no prebuilt binary from GitHub, no headers
# from nodejs.org. That suits plants that reach the internet only through package mirrors.
# serialport's binaries come inside its npm package.
ENV npm_config_build_from_source=better-sqlite3
# Dependencies first, in their own layer: an engine that keeps layers (docker build, buildah
# --layers) reuses it, and the compilation of better-sqlite3, for as long as package.json and
# package-lock.json stay the same. --ignore-scripts holds back the install scripts, among them our
# `prepare` (it compiles src/, not copied yet); `npm rebuild` then runs the dependencies' own.
COPY package.json package-lock.json ./
RUN export npm_config_nodedir="$(dirname "$(dirname "$(command -v node)")")" \
 && npm ci --ignore-scripts \
 && npm rebuild
# Then the sources: compile TypeScript to dist/, drop dev dependencies and the compiler's
# intermediate files (about 25 MB), and make the CLI executable for the `edge-gateway` command of
# the runtime stage.
COPY tsconfig.json tsconfig.web.json ./
COPY src ./src
RUN npm run build \
 && npm prune --omit=dev \
 && rm -rf node_modules/better-sqlite3/build/Release/obj node_modules/better-sqlite3/build/Release/obj.target node_modules/better-sqlite3/deps \
 && chmod 0755 dist/cli.js

FROM node:20-bookworm-slim
# tini runs as PID 1: it forwards `docker stop`'s SIGTERM to node (graceful stop within 10 s) and
# reaps zombies. The gateway runs as user gateway with a fixed uid/gid 10001, so files the host
# hands in (a bind-mounted data directory, a secret file) can be made readable by that id; group
# dialout opens serial ports (Modbus RTU).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 gateway \
 && useradd --system --uid 10001 --gid gateway --groups dialout --home-dir /var/lib/edge-gateway --no-create-home --shell /usr/sbin/nologin gateway \
 && mkdir -p /var/lib/edge-gateway /etc/edge-gateway \
 && chown gateway:gateway /var/lib/edge-gateway
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY config ./config
# `docker exec <container> edge-gateway status` and the other commands.
RUN ln -s /app/dist/cli.js /usr/local/bin/edge-gateway
# GATEWAY_CONFIG: the file `run` and `check` read when --config is not given (mount it there).
# GATEWAY_HEALTH_URL: what HEALTHCHECK asks; change it with http.port.
# NODE_OPTIONS: a small young generation keeps RSS low (bench/memory.ts): about 40 MB less at
# start-up and during import-file uploads, for a little more frequent scavenging.
ENV NODE_ENV=production \
    GATEWAY_CONFIG=/etc/edge-gateway/gateway.yaml \
    GATEWAY_HEALTH_URL=http://127.0.0.1:8080/healthz \
    NODE_OPTIONS=--max-semi-space-size=2
USER gateway
# The working directory is the data volume, so relative paths in the configuration (the defaults
# ./data and ./data/buffer.db) land on it too.
WORKDIR /var/lib/edge-gateway
VOLUME ["/var/lib/edge-gateway"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD node -e "fetch(process.env.GATEWAY_HEALTH_URL,{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/dist/cli.js"]
CMD ["run"]
