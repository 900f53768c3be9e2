import { EventSourceParserStream } from 'eventsource-parser/stream';

/**
 * Reads a server-sent event stream (text/event-stream, WHATWG HTML §9.2) with a kept parser
 * (eventsource-parser) rather than splitting on blank lines by hand: fields split across network
 * chunks, CRLF line ends, comments and multi-line data are the parser's job.
 */
export interface SseEvent {
  event: string;
  data: string;
  id?: string;
}

export interface SseStream {
  status: number;
  headers: Headers;
  /** The `retry:` value the server sent, ms, once seen. */
  retryMs: () => number | null;
  /** Resolves with the next `n` events (waiting for them), or rejects after `timeoutMs`. */
  next: (n?: number, timeoutMs?: number) => Promise<SseEvent[]>;
  close: () => void;
}

export async function openSse(url: string, init: RequestInit = {}): Promise<SseStream> {
  const abort = new AbortController();
  const res = await fetch(url, { ...init, headers: { accept: 'text/event-stream', ...(init.headers as Record<string, string> | undefined) }, signal: abort.signal });
  let retry: number | null = null;
  const stream = res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream({ onRetry: (ms) => (retry = ms) }));
  const reader = stream.getReader();
  return {
    status: res.status,
    headers: res.headers,
    retryMs: () => retry,
    next: async (n = 1, timeoutMs = 20_000) => {
      const out: SseEvent[] = [];
      const deadline = AbortSignal.timeout(timeoutMs);
      const timedOut = new Promise<never>((_, reject) => deadline.addEventListener('abort', () => reject(new Error(`no ${n} events within ${timeoutMs} ms (got ${out.length})`)), { once: true }));
      while (out.length < n) {
        const { value, done } = await Promise.race([reader.read(), timedOut]);
        if (done) throw new Error(`the stream ended after ${out.length} of ${n} events`);
        out.push({ event: value.event ?? 'message', data: value.data, ...(value.id !== undefined ? { id: value.id } : {}) });
      }
      return out;
    },
    close: () => abort.abort(),
  };
}
