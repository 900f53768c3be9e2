/**
 * Counts the members and list items of a JSON text as its bytes arrive, so that a request body
 * whose parse alone would hold the event loop is refused before JSON.parse runs: 3.5 MB of a
 * 300,000-key object took 0.3-1.9 s to parse in one block, where 9 MB of strings (a configuration
 * and a CSV file posted to the console) take a few tens of ms. A comma, `[` or `{` outside a string
 * counts one; strings (their commas included) count nothing. The state carries across chunks.
 */
export class JsonValueCounter {
  count = 0;
  private inString = false;
  private escaped = false;

  /** Adds a chunk of the body; answers the count so far. */
  feed(chunk: Uint8Array): number {
    let n = this.count;
    let inString = this.inString;
    let escaped = this.escaped;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (c === 0x5c) escaped = true;
        else if (c === 0x22) inString = false;
      } else if (c === 0x22) inString = true;
      else if (c === 0x2c || c === 0x5b || c === 0x7b) n += 1;
    }
    this.inString = inString;
    this.escaped = escaped;
    this.count = n;
    return n;
  }
}

/**
 * Members and list items a request body of the local API may hold: the largest any route takes is
 * the console's "Add to configuration" of 20,000 registers of up to 9 settings each.
 */
export const MAX_JSON_VALUES = 250_000;
