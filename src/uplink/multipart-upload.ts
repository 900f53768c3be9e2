import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import { basename } from 'node:path';

export interface UploadResponse {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

const CHUNK = 256 * 1024;
const MAX_RESPONSE_BYTES = 4_000_000;
const agents = { http: new http.Agent({ keepAlive: true, maxSockets: 4 }), https: new https.Agent({ keepAlive: true, maxSockets: 4 }) };

/**
 * POSTs a file as `multipart/form-data` with one part `file` (CONTRACT.md, import jobs), streamed
 * from disk through two reusable 256 kB buffers: a buffer is refilled only after the socket has
 * flushed it (the write callback), so a 128 MB upload costs about 1 MB of memory.
 *
 * Why not undici like every other call: with an iterable or stream body, undici cannot tell when a
 * chunk has left, so every chunk must be a new Buffer; a 128 MB upload then leaves up to ~50 MB of
 * read buffers waiting for the garbage collector (measured with bench/memory.ts), which breaks the
 * gateway's memory target on a small industrial PC.
 */
export function uploadMultipartFile(url: string, headers: Record<string, string>, filePath: string, timeoutMs: number, signal?: AbortSignal): Promise<UploadResponse> {
  const boundary = `edge-gateway-${randomUUID()}`;
  const name = basename(filePath).replace(/["\r\n]/g, '_');
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: application/json\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const size = statSync(filePath).size;
  const target = new URL(url);
  const mod = target.protocol === 'https:' ? https : http;
  return new Promise<UploadResponse>((resolve, reject) => {
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      req.destroy();
      reject(err);
    };
    const req = mod.request(
      target,
      {
        method: 'POST',
        agent: target.protocol === 'https:' ? agents.https : agents.http,
        headers: { ...headers, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(head.length + size + tail.length) },
        timeout: timeoutMs,
        signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let total = 0;
        res.on('data', (c: Buffer) => {
          total += c.length;
          if (total > MAX_RESPONSE_BYTES) fail(Object.assign(new Error(`response body larger than ${MAX_RESPONSE_BYTES} bytes`), { code: 'RESPONSE_TOO_LARGE' }));
          else chunks.push(c);
        });
        res.on('end', () => {
          if (settled) return;
          settled = true;
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', fail);
      },
    );
    req.on('timeout', () => fail(Object.assign(new Error(`upload timed out after ${timeoutMs} ms`), { code: 'UND_ERR_HEADERS_TIMEOUT' })));
    req.on('error', fail);
    const write = (b: Buffer) => {
      const p = new Promise<void>((res, rej) => req.write(b, (err) => (err ? rej(err) : res())));
      // Awaited later (before the buffer is reused); until then a failure (an abort at shutdown)
      // must not surface as an unhandled rejection, which would end the process.
      p.catch(() => undefined);
      return p;
    };
    void (async () => {
      const fd = await open(filePath);
      try {
        const buffers = [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)];
        const flushed: Array<Promise<void> | null> = [null, null];
        await write(head);
        for (let i = 0; !settled; i++) {
          const k = i % 2;
          await flushed[k];
          const { bytesRead } = await fd.read(buffers[k], 0, CHUNK, null);
          if (bytesRead === 0) break;
          flushed[k] = write(bytesRead === CHUNK ? buffers[k] : buffers[k].subarray(0, bytesRead));
        }
        await Promise.all(flushed);
        req.end(tail);
      } finally {
        await fd.close();
      }
    })().catch(fail);
  });
}
