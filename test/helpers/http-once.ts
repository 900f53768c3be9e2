import { request as httpRequest } from 'node:http';

/**
 * One HTTP request on a fresh connection, no retry: the answer's status, or the connection
 * error's code (ECONNRESET, TIMEOUT after 15 s). For the listener-limit tests, where a retry would
 * hide the refusal being tested.
 */
export function requestOnce(url: string, o: { method?: string; headers?: Record<string, string | number>; body?: string; localAddress?: string } = {}): Promise<number | string> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { method: o.method ?? 'GET', headers: o.headers, agent: false, localAddress: o.localAddress, timeout: 15_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('no answer in 15 s'), { code: 'TIMEOUT' })));
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end(o.body);
  });
}
