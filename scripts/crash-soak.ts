/**
 * Runs the crash-safety harness for any number of cycles (200 for the record):
 *   scripts/crash-soak [CYCLES] [--seed N] [--dist] [--drop]
 * --drop: a 1 MB buffer and a mostly failing service, so drop_oldest deletes sealed chunks (kill phase buffer_chunks_dropping).
 * Prints the report; exit code 1 when a sample was lost or an integrity check failed.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatReport, runCrashHarness } from './lib/crash-harness.js';

const args = process.argv.slice(2);
const cycles = Number(args.find((a) => /^\d+$/.test(a)) ?? 200);
const seedIndex = args.indexOf('--seed');
const seed = seedIndex >= 0 ? Number(args[seedIndex + 1]) : Date.now() % 100_000;
const dir = mkdtempSync(join(tmpdir(), 'gw-crash-soak-'));
// The work directory (buffer, config, one log per run) is kept for inspection.
process.stdout.write(`crash soak: ${cycles} cycles, seed ${seed}, work dir ${dir}\n`);
const report = await runCrashHarness({ cycles, dir, seed, useDist: args.includes('--dist'), dropChunks: args.includes('--drop'), log: (l) => process.stdout.write(`${l}\n`) });
process.stdout.write(`\n${formatReport(report)}\n`);
process.exitCode = report.lost === 0 && report.integrity.failed.length === 0 ? 0 : 1;
