/** How many smoke files (smoke-<k>.test.ts) share the benches: vitest runs files in parallel, the tests of a file one after the other. */
export const SMOKE_SHARDS = 4;
