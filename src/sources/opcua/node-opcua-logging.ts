import type { Logger } from 'pino';
import { setErrorLogger, setWarningLogger } from 'node-opcua';

/**
 * node-opcua writes its own warnings and errors to the console (certificates in base64, retry
 * chatter). The gateway logs structured JSON only, so these lines are routed to pino at `debug`
 * (they repeat what the source already reports in plain words, and raise no secret: node-opcua
 * never prints passwords). Installed once per process; the most recently registered logger wins.
 *
 * One line worth knowing about: `[NODE-OPCUA-W27] ... --security-revert=CVE-2023-46809` at
 * start-up on Node 20. It is a self-test of RSA PKCS#1 v1.5 encryption, which only the deprecated
 * Basic128Rsa15/Basic256 policies use; the policies this gateway accepts use RSA-OAEP (see
 * README.md, "Node 20 and the PKCS#1 v1.5 warning").
 */
const loggers: Logger[] = [];
const early: Array<{ level: 'warn' | 'error'; text: string }> = [];
let installed = false;

function route(level: 'warn' | 'error', args: unknown[]): void {
  const text = args.map((a) => (typeof a === 'string' ? a : a instanceof Error ? a.message : safeString(a))).join(' ').trim();
  const logger = loggers[loggers.length - 1];
  if (!logger) {
    if (early.length < 50) early.push({ level, text });
    return;
  }
  logger.debug({ component: 'node-opcua', node_opcua_level: level }, text.length > 2_000 ? `${text.slice(0, 2_000)}...` : text);
}

function safeString(v: unknown): string {
  try {
    return String(v);
  } catch {
    return '[unprintable]';
  }
}

export function installNodeOpcuaLogging(): void {
  if (installed) return;
  installed = true;
  setWarningLogger((...args: unknown[]) => route('warn', args));
  setErrorLogger((...args: unknown[]) => route('error', args));
}

/** Sends node-opcua's own lines to `logger` (at debug) until the returned function is called. */
export function attachNodeOpcuaLogger(logger: Logger): () => void {
  installNodeOpcuaLogging();
  const child = logger.child({ component: 'node-opcua' });
  loggers.push(child);
  for (const line of early.splice(0)) child.debug({ node_opcua_level: line.level }, line.text);
  return () => {
    const i = loggers.indexOf(child);
    if (i >= 0) loggers.splice(i, 1);
  };
}

installNodeOpcuaLogging();
