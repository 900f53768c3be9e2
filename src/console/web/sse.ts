import { createParser } from 'eventsource-parser';

/**
 * Server-sent events read from a text stream (HTML Living Standard §9.2.6) with a kept parser
 * (eventsource-parser): fields split across network chunks, CRLF line ends, comments and
 * multi-line data are the library's job, not hand-written splitting.
 */
export interface SseEvent {
  event: string;
  data: string;
}

/** Feeds text as it arrives; calls `onEvent` for every complete frame that has data. */
export function sseParser(onEvent: (e: SseEvent) => void): (chunk: string) => void {
  const parser = createParser({
    onEvent: (m) => {
      if (m.data) onEvent({ event: m.event ?? 'message', data: m.data });
    },
  });
  return (chunk) => parser.feed(chunk);
}
