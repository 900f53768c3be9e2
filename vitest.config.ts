import { defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/sequencer.js';

// Tests talk to real peers over loopback (emulator over HTTP, OPC UA, Modbus and MQTT servers),
// so they are given generous timeouts and run in separate processes. Files run longest first
// (test/sequencer.ts) so both workers stay busy to the end.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
    reporters: ['default'],
    sequence: { sequencer: LongestFirstSequencer },
  },
});
