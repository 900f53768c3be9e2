import { describe, expect, it } from 'vitest';
import { JsonValueCounter } from '../../src/http/json-budget.js';

describe('JSON values counted as a body arrives', () => {
  it('counts members and list items, not the commas and brackets inside strings, across chunk boundaries', () => {
    const text = JSON.stringify({ yaml: 'a: [1, 2]\n{x, y}', csv: 'k,s,v\r\n"q,\\"r",1\r\n', list: [1, 2, [3, { a: 4 }]] });
    const whole = new JsonValueCounter().feed(Buffer.from(text));
    // { yaml , csv , list [1 , 2 , [3 , { a
    expect(whole).toBe(9);
    for (let cut = 1; cut < text.length; cut++) {
      const c = new JsonValueCounter();
      c.feed(Buffer.from(text.slice(0, cut)));
      expect(c.feed(Buffer.from(text.slice(cut)))).toBe(whole);
    }
  });
});
