import type { LiveHello, LiveTick } from '../api/live.js';
import { sseParser } from './sse.js';
import { askToken } from './token-prompt.js';
import { token } from './token.js';

/** The stream's state as the page shows it. */
export type LinkState = 'connecting' | 'live' | 'auth' | 'busy' | 'lost';

/**
 * The live stream (GET /console/api/events): server-sent events read with fetch (EventSource
 * cannot send the Authorization header). Reconnects by itself with a growing delay; `onState`
 * says connected / lost. Returns a function that stops it.
 */
export function connectLive({ onHello, onTick, onState }: { onHello: (m: LiveHello) => void; onTick: (m: LiveTick) => void; onState: (s: LinkState) => void }): () => void {
  let stopped = false;
  let ctrl: AbortController | null = null;
  let delay = 1000;
  const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const run = async () => {
    while (!stopped) {
      const abort = new AbortController();
      ctrl = abort;
      let watchdog: ReturnType<typeof setTimeout> | undefined;
      try {
        const headers: Record<string, string> = { accept: 'text/event-stream' };
        const t = token.get();
        if (t) headers.authorization = `Bearer ${t}`;
        const res = await fetch('/console/api/events', { headers, signal: abort.signal, cache: 'no-store' });
        if (res.status === 401) {
          onState('auth');
          await askToken('Reading this gateway needs its API token.');
          continue;
        }
        // Too many streams open (http.max_streams_per_client / max_streams): wait as told, then try again.
        if (res.status === 429 || res.status === 503) {
          onState('busy');
          const after = Math.min(60, Math.max(1, Number(res.headers.get('retry-after')) || 5)) * 1000;
          await res.body?.cancel();
          await wait(after);
          continue;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        onState('live');
        delay = 1000;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        // A gateway that stops answering without closing the socket: no tick for 5 s is a loss.
        const arm = () => {
          clearTimeout(watchdog);
          watchdog = setTimeout(() => abort.abort(), 5000);
        };
        arm();
        const feed = sseParser(({ event, data }) => {
          if (event === 'hello') onHello(JSON.parse(data) as LiveHello);
          else if (event === 'tick') onTick(JSON.parse(data) as LiveTick);
        });
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          arm();
          feed(value);
        }
      } catch {
        /* lost: retried below */
      }
      clearTimeout(watchdog);
      if (stopped) return;
      onState('lost');
      await wait(delay);
      delay = Math.min(delay * 1.5, 5000);
    }
  };
  void run();
  return () => {
    stopped = true;
    ctrl?.abort();
  };
}
