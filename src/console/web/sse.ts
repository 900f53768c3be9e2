/**
 * Server-sent events read from a text stream (HTML Living Standard §9.2.6, the part the gateway
 * sends: `event:` and `data:` lines, frames ended by a blank line). Kept on its own so a library
 * can take its place without touching the rest.
 */
export interface SseEvent {
  event: string;
  data: string;
}

/** Feeds text as it arrives; calls `onEvent` for every complete frame that has data. */
export function sseParser(onEvent: (e: SseEvent) => void): (chunk: string) => void {
  let buf = '';
  return (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let event = 'message';
      let data = '';
      for (const line of frame.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data += line.slice(5).trim();
      }
      if (data) onEvent({ event, data });
    }
  };
}
