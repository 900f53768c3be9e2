import { parseArgs, type ParseArgsConfig } from 'node:util';
import { describeError } from '../core/errors.js';

/** Shared by commands: parse flags, turning parse errors into a usage error naming the flag. */
export function parseFlags<T extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: T, help: string) {
  try {
    const parsed = parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
    if ((parsed.values as { help?: boolean }).help) {
      process.stdout.write(help.endsWith('\n') ? help : `${help}\n`);
      return null;
    }
    return parsed;
  } catch (err) {
    throw new UsageError(`${describeError(err).replace(/^ERR_PARSE_ARGS_[A-Z_]+: /, '')}\n\n${help}`);
  }
}

/** A command-line mistake: printed with the command's help, exit code 2. */
export class UsageError extends Error {}

