/**
 * The tracking-service emulator: an in-process HTTP server that implements the slice of the
 * tracking service the gateway uses (/work/shared/spec/CONTRACT.md) plus an inspection and fault
 * API under /_emulator/. Never imported by the gateway's runtime path. Guide: ./README.md.
 */
export { startEmulator, type EmulatorHandle, type EmulatorOptions, type ResetOptions } from './emulator.js';
export { runEmulatorCli, DEFAULT_CLI_PORT, EMULATOR_USAGE, type CliIo } from './cli.js';
export type { Faults, FailNext, FaultSetting } from './faults.js';
export { parseFaultFlags } from './faults.js';
export type { JournalEntry, JournalQuery } from './journal.js';
export { generateFixture, loadFixture, validateFixture, type Fixture, type FixtureInput, type FixtureIndex, type GeneratedFixtureOptions } from './fixture.js';
export type { AnnotationResponse, EmulatorStats, ImportJobStatus, ImportJobView, StoredValue, ValueView } from './store.js';
export * from './demo-fixture.js';
