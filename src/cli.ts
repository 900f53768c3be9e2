#!/usr/bin/env node
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { UsageError } from './commands/flags.js';
import { ConfigError, describeError } from './core/errors.js';
import { VERSION } from './version.js';

/**
 * `edge-gateway <command>`. Each command lives in its own module and is loaded only when used,
 * so `edge-gateway --help` answers at once.
 */
interface Command {
  summary: string;
  run: (argv: string[]) => Promise<number>;
}

const COMMANDS: Record<string, Command> = {
  run: { summary: 'run the gateway with a config file', run: async (argv) => (await import('./commands/run.js')).runCommand(argv) },
  check: { summary: 'validate a config file; --online also checks credentials and mapped variables', run: async (argv) => (await import('./commands/check.js')).checkCommand(argv) },
  config: { summary: "the config file's history: list its versions, show one, roll back to one", run: async (argv) => (await import('./commands/config.js')).configCommand(argv) },
  status: { summary: 'show the status of a running gateway', run: async (argv) => (await import('./commands/status.js')).statusCommand(argv) },
  backup: { summary: 'write a consistent copy of the buffer file while the gateway runs', run: async (argv) => (await import('./commands/backup.js')).backupCommand(argv) },
  fleet: { summary: 'live table of every gateway publishing its status on the plant broker', run: async (argv) => (await import('./commands/fleet.js')).fleetCommand(argv) },
  demo: { summary: 'run emulator + simulated plant + gateway (what `npm start` does)', run: async (argv) => (await import('./commands/demo.js')).demoCommand(argv) },
  emulator: { summary: 'run the tracking-service emulator', run: async (argv) => (await import('./emulator/index.js')).runEmulatorCli(argv) },
};

/** Commands contributed by other components, registered if their module exists. */
const OPTIONAL_COMMANDS: Record<string, { summary: string; module: string; fn: string }> = {
  'set-aside': { summary: 'list, requeue or drop samples the service refused', module: './commands/set-aside.js', fn: 'setAsideCommand' },
  annotate: { summary: 'create an operator annotation (instant or range)', module: './commands/annotate.js', fn: 'annotateCommand' },
  gaps: { summary: 'list intervals without data and whether history filled them', module: './commands/gaps.js', fn: 'gapsCommand' },
  browse: { summary: 'browse an OPC UA server and print a config snippet', module: './sources/opcua/browse-cli.js', fn: 'runBrowseCli' },
  'modbus-probe': { summary: 'read Modbus registers and print every candidate decoding', module: './sources/modbus/probe-cli.js', fn: 'runModbusProbeCli' },
};

function usage(): string {
  const all: Array<[string, string]> = [...Object.entries(COMMANDS).map(([k, v]) => [k, v.summary] as [string, string]), ...Object.entries(OPTIONAL_COMMANDS).map(([k, v]) => [k, v.summary] as [string, string])];
  all.sort((a, b) => a[0].localeCompare(b[0]));
  return [
    `edge-gateway ${VERSION}: factory-floor edge gateway (OPC UA, Modbus, MQTT → tracking service)`,
    '',
    'Usage: edge-gateway <command> [options]     (edge-gateway <command> --help for its options)',
    '',
    'Commands:',
    ...all.map(([k, v]) => `  ${k.padEnd(14)} ${v}`),
    '',
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(usage());
    return command ? 0 : 2;
  }
  if (command === '--version' || command === '-v') {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const known = COMMANDS[command];
  if (known) return known.run(rest);
  const optional = OPTIONAL_COMMANDS[command];
  if (optional) {
    let mod: Record<string, unknown>;
    try {
      mod = (await import(optional.module)) as Record<string, unknown>;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && String((err as Error).message).includes(optional.module.slice(2).replace(/\.js$/, ''))) {
        process.stderr.write(`edge-gateway: "${command}" is not available in this build\n`);
        return 2;
      }
      throw err;
    }
    const fn = mod[optional.fn] as ((argv: string[]) => Promise<number>) | undefined;
    if (typeof fn !== 'function') {
      process.stderr.write(`edge-gateway: "${command}" is not available in this build\n`);
      return 2;
    }
    return fn(rest);
  }
  process.stderr.write(`edge-gateway: unknown command "${command}"\n\n${usage()}`);
  return 2;
}

/** True when this file is the program being run (directly, through the npm bin link, or tsx). */
function isEntryPoint(): boolean {
  if (!process.argv[1]) return false;
  try {
    return realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main(process.argv.slice(2)).then(
    (code) => {
      if (code !== 0) process.exitCode = code;
    },
    (err) => {
      if (err instanceof UsageError) {
        process.stderr.write(`edge-gateway: ${err.message}\n`);
        process.exitCode = 2;
      } else if (err instanceof ConfigError) {
        process.stderr.write(`edge-gateway: configuration ${err.file ? `${err.file} ` : ''}is not valid:\n  ${err.problems.join('\n  ')}\n`);
        process.exitCode = 2;
      } else {
        process.stderr.write(`edge-gateway: ${describeError(err)}\n`);
        process.exitCode = 1;
      }
    },
  );
}
