/**
 * Streaming reader of an import-job file `{"items": [ITEM, ...]}` (CONTRACT.md
 * "POST /machine-data/import-jobs"; files up to 128 MB, ≈1.2 M items). It walks the bytes once,
 * finds each element of the top-level `items` array, and hands it to `onItem` parsed on its own,
 * so the file is never held in memory as a whole (neither as text nor as one object graph).
 *
 * In counting mode (`parse: false`) it only finds element boundaries; the upload handler uses that
 * to fill `items_received` of the 202 answer while the file streams to disk.
 *
 * Anything that makes the file unreadable (not JSON, not an object, no `items` array, a broken
 * element) sets `error` and stops the scan; the job then ends `failed`. Other top-level keys are
 * allowed and checked for valid JSON but otherwise ignored [A].
 */

const enum S {
  Start,
  KeyOrEnd,
  Key,
  KeyString,
  Colon,
  Value,
  ItemsFirst,
  ItemsNext,
  Capture,
  AfterValue,
  Done,
  Failed,
}

const WS = new Uint8Array(256);
WS[0x20] = WS[0x09] = WS[0x0a] = WS[0x0d] = 1;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;

/**
 * Inside a string starting at `from` (`escaped`: the byte at `from` is escaped by a backslash that
 * ended the previous chunk): index of the closing quote, or -1 when the string runs past the chunk.
 * A quote is escaped iff an odd run of backslashes precedes it.
 */
function skipString(buf: Buffer, from: number, escaped: boolean): number {
  let i = escaped ? from + 1 : from;
  for (;;) {
    if (i >= buf.length) return -1;
    const q = buf.indexOf(QUOTE, i);
    if (q < 0) return -1;
    let k = q - 1;
    while (k >= i && buf[k] === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q;
    i = q + 1;
  }
}

/** Does the chunk end in the middle of an escape (an odd run of backslashes after `from`)? */
function trailingEscape(buf: Buffer, from: number): boolean {
  let k = buf.length - 1;
  while (k >= from && buf[k] === BACKSLASH) k--;
  return (buf.length - 1 - k) % 2 === 1;
}

/**
 * Longest value the scanner holds to parse: an item (`{timestamp, machine_variable_id, value}` is
 * under 200 bytes), another top-level value or a key. Without it one element spanning the whole
 * 128 MB file was held in pieces and parsed in one block of the emulator's event loop.
 */
export const MAX_VALUE_BYTES = 64 * 1024;

export interface ScannerOptions {
  /** Parse each element and call `onItem` (default true); false only counts. */
  parse?: boolean;
  onItem?: (item: unknown, index: number) => void;
}

export class ItemsScanner {
  /** Elements of `items` seen so far. */
  count = 0;
  /** Why the file is unreadable, once it is known to be. */
  error: string | null = null;

  private state = S.Start;
  private readonly parse: boolean;
  private readonly onItem?: (item: unknown, index: number) => void;
  private offset = 0; // bytes consumed before the current chunk
  private sawItems = false;
  private key = '';
  private keyParts: Buffer[] = [];
  // Capture of one value: an element of `items` or another top-level value.
  private capturingItem = false;
  private depth = 0;
  private inString = false;
  private escape = false;
  private parts: Buffer[] = [];
  /** Bytes held in `parts` (and `keyParts`). */
  private held = 0;
  private firstChunk = true;
  // Elements that started and ended in the current chunk, not yet parsed: parsed together as one
  // JSON array at the end of the chunk (one native parse instead of one per element).
  private starts = new Int32Array(4096);
  private ends = new Int32Array(4096);
  private pending = 0;

  constructor(opts: ScannerOptions = {}) {
    this.parse = opts.parse ?? true;
    this.onItem = opts.onItem;
  }

  get failed(): boolean {
    return this.state === S.Failed;
  }

  private fail(message: string, at: number): void {
    this.error = `${message} (at byte ${this.offset + at})`;
    this.state = S.Failed;
    this.parts = [];
    this.keyParts = [];
    this.held = 0;
  }

  /** What the value being read is called in messages. */
  private valueName(): string {
    return this.capturingItem ? `items[${this.count}]` : `"${this.key}"`;
  }

  /** Refuses a value or key longer than MAX_VALUE_BYTES; false when it is. */
  private withinBound(bytes: number, at: number, what: string): boolean {
    if (bytes <= MAX_VALUE_BYTES) return true;
    this.fail(`${what} is longer than ${MAX_VALUE_BYTES / 1024} KiB; an item of an import file is {timestamp, machine_variable_id, value}, a few hundred bytes`, at);
    return false;
  }

  push(buf: Buffer): void {
    if (this.state === S.Failed) return;
    let i = 0;
    if (this.firstChunk) {
      this.firstChunk = false;
      if (buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) i = 3; // UTF-8 BOM
    }
    const n = buf.length;
    let captureStart = this.state === S.Capture ? 0 : -1;
    let keyStart = this.state === S.KeyString ? 0 : -1;
    while (i < n) {
      const c = buf[i];
      switch (this.state) {
        case S.Capture: {
          // Tight loop over one value; ends at a `,` or closing bracket at depth 0.
          let depth = this.depth;
          let inString = this.inString;
          let escape = this.escape;
          let ended = -1;
          for (; i < n; i++) {
            if (inString) {
              // Jump to the closing quote with a native search (strings are most of the bytes).
              const close = skipString(buf, i, escape);
              escape = close < 0 && trailingEscape(buf, escape ? i + 1 : i);
              if (close < 0) {
                i = n;
                break;
              }
              inString = false;
              i = close;
              continue;
            }
            const b = buf[i];
            if (b === QUOTE) inString = true;
            else if (b === LBRACE || b === LBRACKET) depth++;
            else if (b === RBRACE || b === RBRACKET || b === COMMA) {
              if (depth === 0) {
                ended = i;
                break;
              }
              if (b !== COMMA) depth--;
            }
          }
          this.depth = depth;
          this.inString = inString;
          this.escape = escape;
          if (ended < 0) break; // value continues in the next chunk
          const b = buf[ended];
          if (this.capturingItem ? b === RBRACE : b === RBRACKET) {
            this.fail(`unexpected "${String.fromCharCode(b)}"`, ended);
            return;
          }
          if (!this.emit(buf, captureStart, ended)) return;
          captureStart = -1;
          if (this.capturingItem) this.state = b === COMMA ? S.ItemsNext : S.AfterValue;
          else this.state = b === COMMA ? S.Key : S.Done;
          i = ended + 1;
          break;
        }
        case S.KeyString: {
          let escape = this.escape;
          let ended = -1;
          for (; i < n; i++) {
            const b = buf[i];
            if (escape) escape = false;
            else if (b === BACKSLASH) escape = true;
            else if (b === QUOTE) {
              ended = i;
              break;
            }
          }
          this.escape = escape;
          if (ended < 0) break;
          if (!this.withinBound(this.held + ended - keyStart, ended, 'a key')) return;
          const raw = this.keyParts.length > 0 ? Buffer.concat([...this.keyParts, buf.subarray(keyStart, ended)]).toString('utf8') : buf.toString('utf8', keyStart, ended);
          this.keyParts = [];
          this.held = 0;
          keyStart = -1;
          try {
            this.key = JSON.parse(`"${raw}"`) as string;
          } catch {
            this.fail('not valid JSON: bad object key', ended);
            return;
          }
          this.state = S.Colon;
          i = ended + 1;
          break;
        }
        default: {
          if (WS[c]) {
            i++;
            break;
          }
          if (!this.step(c, i)) return;
          const next = this.state as S; // step() moved the state on
          if (next === S.Capture) {
            captureStart = i; // the capture loop reads this byte again
          } else if (next === S.KeyString) {
            keyStart = i + 1;
            this.escape = false;
            i++;
          } else i++;
        }
      }
    }
    if (!this.flush(buf)) return;
    // Keep the unfinished tail for the next chunk (within MAX_VALUE_BYTES).
    if (this.state === S.Capture && this.parse && captureStart >= 0 && captureStart < n) {
      if (!this.withinBound(this.held + n - captureStart, n, this.valueName())) return;
      this.parts.push(buf.subarray(captureStart));
      this.held += n - captureStart;
    }
    if (this.state === S.KeyString && keyStart >= 0 && keyStart < n) {
      if (!this.withinBound(this.held + n - keyStart, n, 'a key')) return;
      this.keyParts.push(buf.subarray(keyStart));
      this.held += n - keyStart;
    }
    this.offset += n;
  }

  /** One structural byte outside a captured value; false when the file is broken. */
  private step(c: number, at: number): boolean {
    switch (this.state) {
      case S.Start:
        if (c !== LBRACE) return this.fail(c === LBRACKET ? 'the file is a JSON array; expected an object {"items": [...]}' : 'not a JSON object; expected {"items": [...]}', at), false;
        this.state = S.KeyOrEnd;
        return true;
      case S.KeyOrEnd:
      case S.Key:
        if (c === RBRACE && this.state === S.KeyOrEnd) {
          this.state = S.Done;
          return true;
        }
        if (c !== QUOTE) return this.fail('not valid JSON: expected an object key', at), false;
        this.state = S.KeyString;
        return true;
      case S.Colon:
        if (c !== COLON) return this.fail('not valid JSON: expected ":"', at), false;
        this.state = S.Value;
        return true;
      case S.Value:
        if (this.key === 'items') {
          if (this.sawItems) return this.fail('"items" appears twice', at), false;
          this.sawItems = true;
          if (c !== LBRACKET) return this.fail('"items" is not an array', at), false;
          this.state = S.ItemsFirst;
          return true;
        }
        this.startCapture(false);
        return true;
      case S.ItemsFirst:
        if (c === RBRACKET) {
          this.state = S.AfterValue;
          return true;
        }
        this.startCapture(true);
        return true;
      case S.ItemsNext:
        if (c === RBRACKET) return this.fail('not valid JSON: trailing comma in "items"', at), false;
        this.startCapture(true);
        return true;
      case S.AfterValue:
        if (c === COMMA) this.state = S.Key;
        else if (c === RBRACE) this.state = S.Done;
        else return this.fail('not valid JSON: expected "," or "}"', at), false;
        return true;
      case S.Done:
        return this.fail('unexpected data after the JSON document', at), false;
      default:
        return false;
    }
  }

  private startCapture(item: boolean): void {
    this.capturingItem = item;
    this.depth = 0;
    this.inString = false;
    this.escape = false;
    this.parts = [];
    this.state = S.Capture;
  }

  /** A value ended at `end` (exclusive); parse it when asked. */
  private emit(buf: Buffer, start: number, end: number): boolean {
    if (this.parse && !this.withinBound(this.held + end - start, end, this.valueName())) return false;
    const index = this.capturingItem ? this.count++ : -1;
    if (!this.parse) return true;
    if (index >= 0 && this.parts.length === 0) {
      if (this.pending === this.starts.length) {
        const grow = (a: Int32Array) => {
          const b = new Int32Array(a.length * 2);
          b.set(a);
          return b;
        };
        this.starts = grow(this.starts);
        this.ends = grow(this.ends);
      }
      this.starts[this.pending] = start;
      this.ends[this.pending] = end;
      this.pending++;
      return true;
    }
    if (!this.flush(buf)) return false;
    const text = this.parts.length > 0 ? Buffer.concat([...this.parts, buf.subarray(start, end)]).toString('utf8') : buf.toString('utf8', start, end);
    this.parts = [];
    this.held = 0;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      this.fail(`not valid JSON in ${index >= 0 ? `items[${index}]` : `"${this.key}"`}: ${(err as Error).message}`, end);
      return false;
    }
    if (index >= 0) this.onItem?.(value, index);
    return true;
  }

  /** Parses the pending elements of this chunk, in order; on a syntax error finds the bad one. */
  private flush(buf: Buffer): boolean {
    const k = this.pending;
    if (k === 0) return true;
    this.pending = 0;
    const base = this.count - k;
    let all: unknown;
    try {
      all = JSON.parse(`[${buf.toString('utf8', this.starts[0], this.ends[k - 1])}]`);
    } catch {
      all = undefined;
    }
    if (Array.isArray(all) && all.length === k) {
      for (let i = 0; i < k; i++) this.onItem?.(all[i], base + i);
      return true;
    }
    for (let i = 0; i < k; i++) {
      let value: unknown;
      try {
        value = JSON.parse(buf.toString('utf8', this.starts[i], this.ends[i]));
      } catch (err) {
        this.fail(`not valid JSON in items[${base + i}]: ${(err as Error).message}`, this.ends[i]);
        return false;
      }
      this.onItem?.(value, base + i);
    }
    return true;
  }

  /** The input ended; sets `error` when the document is incomplete or has no `items`. */
  end(): void {
    if (this.state === S.Failed) return;
    if (this.state === S.Start) this.fail('the file is empty', 0);
    else if (this.state !== S.Done) this.fail('the file ends in the middle of the JSON document', 0);
    else if (!this.sawItems) this.fail('no "items" array', 0);
  }
}
