import type { IncomingMessage } from 'node:http';
import { MAX_DRAIN_BYTES, MAX_JSON_BODY_BYTES } from './contract.js';
import { noteBodyBytes } from './journal.js';

/**
 * Small HTTP helpers: replies, errors in the standard envelope `{code, message}` (§7), and body
 * reading with a hard byte limit (§8).
 */

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Close the connection after answering (used when an oversized body was not read). */
  close?: boolean;
}

/** An error that is an HTTP answer. */
export class HttpError extends Error {
  constructor(readonly reply: Reply) {
    super(typeof (reply.body as { message?: unknown })?.message === 'string' ? (reply.body as { message: string }).message : `HTTP ${reply.status}`);
  }
}

/** Thrown when the client went away before its body was read; nothing is answered. */
export class ClientGone extends Error {}

export const errorReply = (status: number, code: string, message: string, extra: Partial<Reply> = {}): Reply => ({ status, body: { code, message }, ...extra });
export const badRequest = (message: string) => new HttpError(errorReply(400, 'bad_request', message));
export const notFound = (message: string) => new HttpError(errorReply(404, 'not_found', message));

/** §8: a JSON body over the limit gets 413; the body is "not given" [A]: `{code: "payload_too_large"}`. */
export function tooLarge(limit: number, close = false): HttpError {
  return new HttpError(errorReply(413, 'payload_too_large', `request body is over the limit of ${limit.toLocaleString('en-US')} bytes`, { close }));
}

/** Status code -> error code of §7 (used for injected errors too). */
export function codeForStatus(status: number): string {
  switch (status) {
    case 400: return 'bad_request';
    case 401: return 'unauthorized';
    case 403: return 'forbidden';
    case 404: return 'not_found';
    case 405: return 'method_not_allowed';
    case 409: return 'conflict';
    case 413: return 'payload_too_large';
    case 429: return 'rate_limit_exceeded';
    case 501: return 'not_implemented';
    case 502: return 'bad_gateway';
    case 503: return 'service_unavailable';
    case 504: return 'gateway_timeout';
    default: return status >= 500 ? 'internal_server_error' : 'error';
  }
}

/**
 * Reads a request body of at most `limit` bytes. The Content-Length is checked first and the
 * streamed bytes are counted as well (chunked bodies); nothing beyond the limit is kept. An
 * oversized body is drained (read and dropped) so the client reads the 413 on a healthy connection,
 * up to MAX_DRAIN_BYTES; past that the connection is closed after the answer.
 */
export function readBody(req: IncomingMessage, limit = MAX_JSON_BODY_BYTES): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_DRAIN_BYTES) return Promise.reject(tooLarge(limit, true));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = Number.isFinite(declared) && declared > limit;
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      fn();
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (over || size > limit) {
        over = true;
        chunks.length = 0;
        if (size > MAX_DRAIN_BYTES) {
          req.pause();
          finish(() => reject(tooLarge(limit, true)));
        }
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => {
      noteBodyBytes(req, size);
      finish(() => (over ? reject(tooLarge(limit)) : resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size))));
    });
    req.once('error', () => finish(() => reject(new ClientGone())));
    req.once('close', () => finish(() => reject(new ClientGone())));
  });
}

/** Parses a JSON body; 400 naming the problem when it is empty or malformed. */
export function parseJsonBody(buf: Buffer): unknown {
  if (buf.length === 0) throw badRequest('request body is empty; a JSON document is required');
  try {
    return JSON.parse(buf.toString('utf8'));
  } catch (err) {
    throw badRequest(`request body is not valid JSON: ${(err as Error).message}`);
  }
}

export async function readJson(req: IncomingMessage, limit = MAX_JSON_BODY_BYTES): Promise<unknown> {
  return parseJsonBody(await readBody(req, limit));
}
