import { describe, expect, it } from 'vitest';
import { applyV8MemoryFlags, V8_MEMORY_FLAGS } from '../../src/runtime/v8-memory.js';

describe('V8 memory flags', () => {
  it('applies every flag that node was not given on its own command line, in any spelling', () => {
    expect(applyV8MemoryFlags([])).toEqual([...V8_MEMORY_FLAGS]);
    expect(applyV8MemoryFlags(['--heap_growing_percent=100', '--wasm-tier-up', '--max-semi-space-size=2'])).toEqual(['--no-wasm-dynamic-tiering']);
  });
});
