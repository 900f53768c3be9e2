import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';

/**
 * open62541 1.4.19 (a C OPC UA SDK) as a second server implementation for tests, beside node-opcua:
 * interop faults that node-opcua on both sides hides show against it. `scripts/install-open62541`
 * (run by `.ci/run` through scripts/install-test-deps) installs it into PREFIX, the cache folder
 * below; test servers written in C (under test/fixtures/open62541/) are compiled against it once
 * per content and kept by hash.
 */

/** Where scripts/install-open62541 puts the library (the default of the tool's own build.sh). */
export const OPEN62541_PREFIX = process.env.OPEN62541_PREFIX || join(homedir(), '.cache', 'open62541-1.4.19');
/** Compiled test servers, named by the hash of what went into them. */
const BIN_DIR = process.env.OPEN62541_TEST_BIN || join(homedir(), '.cache', 'edge-gateway', 'open62541-servers');

/**
 * Whether the open62541 tests run. Without the library they are skipped with a visible notice,
 * except under CI (`.ci/run` installs it), where a missing library must fail the run.
 */
export function open62541Available(what: string): boolean {
  const ready = existsSync(join(OPEN62541_PREFIX, '.ready')) && existsSync(join(OPEN62541_PREFIX, 'lib', 'libopen62541.so'));
  const cc = spawnSync('cc', ['--version'], { stdio: 'ignore' }).status === 0;
  if (ready && cc) return true;
  const missing = !ready ? `open62541 is not installed in ${OPEN62541_PREFIX} (run scripts/install-open62541)` : 'no C compiler (cc)';
  if (process.env.CI) throw new Error(`${missing} but CI is set: ${what} must run in CI`);
  console.warn(`\n*** SKIPPING ${what}: ${missing} ***\n`);
  return false;
}

/**
 * Compiles a C server against open62541 (`cc ... -lopen62541`), or finds it compiled already: the
 * binary's name carries the hash of the source, the library's version file and the flags.
 */
export function compileOpen62541Server(sourcePath: string): string {
  const source = readFileSync(sourcePath);
  const flags = ['-O2', '-std=c99', '-Wall', `-I${join(OPEN62541_PREFIX, 'include')}`, `-L${join(OPEN62541_PREFIX, 'lib')}`, `-Wl,-rpath,${join(OPEN62541_PREFIX, 'lib')}`];
  const hash = createHash('sha256').update(source).update(readFileSync(join(OPEN62541_PREFIX, '.ready'))).update(flags.join(' ')).digest('hex').slice(0, 16);
  const binary = join(BIN_DIR, `${basename(sourcePath, '.c')}-${hash}`);
  if (existsSync(binary)) return binary;
  mkdirSync(BIN_DIR, { recursive: true });
  // Compiled under a name of its own, then renamed: two test processes may compile at once.
  const tmp = `${binary}.${process.pid}.tmp`;
  const r = spawnSync('cc', [...flags, '-o', tmp, sourcePath, '-lopen62541', '-lm'], { encoding: 'utf8' });
  if (r.status !== 0) {
    rmSync(tmp, { force: true });
    throw new Error(`cc ${basename(sourcePath)} failed (${r.status}): ${r.stderr}`);
  }
  renameSync(tmp, binary);
  return binary;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** A C test server driven over stdin: one command a line, one answer line each (`ok <command> <unix ms>` or `error ...`). */
export interface CommandServer {
  port: number;
  endpointUrl: string;
  /** Sends a command and waits for its answer: the server's clock (epoch ms) after it. Rejects on `error`. */
  send(command: string): Promise<number>;
  /** Everything the server wrote to stderr (its log). */
  log(): string;
  close(): Promise<void>;
}

/**
 * Starts a compiled server with `PORT ...args` on a free port (tried again on another port when
 * the one picked was taken in between) and waits for its `ready` line.
 */
export async function startCommandServer(binary: string, args: string[] = []): Promise<CommandServer> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    try {
      return await launch(binary, port, args);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

async function launch(binary: string, port: number, args: string[]): Promise<CommandServer> {
  const child: ChildProcessWithoutNullStreams = spawn(binary, [String(port), ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += String(d)));
  const lines = createInterface({ input: child.stdout });
  const waiting: Array<(line: string) => void> = [];
  let ready: ((line: string) => void) | null = null;
  lines.on('line', (line) => {
    if (ready) return ready(line);
    waiting.shift()?.(line);
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${basename(binary)} did not start within 20 s: ${stderr}`)), 20_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${basename(binary)} exited with ${code}: ${stderr}`));
    });
    ready = (line) => {
      if (!line.startsWith('ready')) return;
      ready = null;
      clearTimeout(timer);
      resolve();
    };
  });
  let exited = false;
  child.once('exit', () => {
    exited = true;
    for (const w of waiting.splice(0)) w('error exited');
  });
  // Commands are answered in order, one line each; sent one at a time.
  let chain: Promise<unknown> = Promise.resolve();
  const send = (command: string): Promise<number> => {
    const next = chain.then(
      () =>
        new Promise<number>((resolve, reject) => {
          if (exited) return reject(new Error(`${basename(binary)} has exited: ${stderr}`));
          waiting.push((line) => {
            const m = /^ok \S+ (\d+)$/.exec(line);
            if (m) resolve(Number(m[1]));
            else reject(new Error(`${command}: ${line}`));
          });
          child.stdin.write(`${command}\n`);
        }),
    );
    chain = next.catch(() => undefined);
    return next;
  };
  return {
    port,
    endpointUrl: `opc.tcp://127.0.0.1:${port}`,
    send,
    log: () => stderr,
    async close() {
      if (exited) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.stdin.end(); // EOF: the server shuts down cleanly
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await gone;
      clearTimeout(timer);
    },
  };
}
