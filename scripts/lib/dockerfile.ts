/**
 * Reads a Dockerfile into stages of steps that scripts/container-check can perform without a
 * container engine. Only the instructions and RUN forms the check knows how to perform faithfully
 * are accepted; anything else is a `DockerfileError` naming the line, so the check fails instead of
 * silently skipping a step that `docker build` would run.
 */

export class DockerfileError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(line > 0 ? `Dockerfile line ${line}: ${message}` : message);
  }
}

/** One `&&`-separated part of a RUN command, classified by what performing it on a host means. */
export type RunSegment =
  | { kind: 'apt-update'; text: string }
  | { kind: 'apt-install'; text: string; packages: string[] }
  /** `rm -rf /var/lib/apt/lists/*`: trims the image; never performed on the host. */
  | { kind: 'apt-clean'; text: string }
  | { kind: 'groupadd'; text: string; name: string; gid?: number }
  | { kind: 'useradd'; text: string; name: string; uid?: number; group?: string; groups: string[]; home?: string }
  /** Absolute paths of the image's filesystem: created under the stage's root directory. */
  | { kind: 'mkdir'; text: string; paths: string[] }
  | { kind: 'chown'; text: string; user: string; group?: string; paths: string[]; recursive: boolean }
  | { kind: 'symlink'; text: string; target: string; link: string }
  /** Anything else: run with /bin/sh in the stage's working directory, as `docker build` would. */
  | { kind: 'shell'; text: string };

export interface HealthCheck {
  intervalMs: number;
  timeoutMs: number;
  startPeriodMs: number;
  retries: number;
  /** Shell form (run with /bin/sh -c) or exec form. */
  command: { shell: string } | { exec: string[] };
}

export type Step =
  | { kind: 'run'; line: number; text: string; segments: RunSegment[] }
  | { kind: 'workdir'; line: number; path: string }
  | { kind: 'copy'; line: number; from?: string; sources: string[]; dest: string }
  | { kind: 'env'; line: number; vars: Array<[string, string]> }
  | { kind: 'user'; line: number; user: string }
  | { kind: 'volume'; line: number; paths: string[] }
  | { kind: 'expose'; line: number; ports: number[] }
  | { kind: 'healthcheck'; line: number; check: HealthCheck }
  | { kind: 'entrypoint'; line: number; argv: string[] }
  | { kind: 'cmd'; line: number; argv: string[] };

export interface Stage {
  index: number;
  name?: string;
  line: number;
  image: string;
  steps: Step[];
}

const TEACH = 'scripts/container-check does not know how to perform it without a container engine; teach it (scripts/lib/dockerfile.ts) or use a supported form';

/** Joins continuation lines and drops comments and blank lines, keeping each instruction's first line number. */
export function logicalLines(text: string): Array<{ line: number; text: string }> {
  const out: Array<{ line: number; text: string }> = [];
  let current: { line: number; text: string } | null = null;
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i];
    const trimmed = raw.trim();
    // Comment lines are removed even inside a continued instruction, as Docker does.
    if (trimmed.startsWith('#')) continue;
    if (trimmed === '' && !current) continue;
    const continues = /\\\s*$/.test(raw);
    const body = continues ? raw.replace(/\\\s*$/, '') : raw;
    if (current) current.text += ` ${body.trim()}`;
    else current = { line: i + 1, text: body.trim() };
    if (!continues) {
      out.push(current);
      current = null;
    }
  }
  if (current) out.push(current);
  return out;
}

/** Splits on whitespace, honouring single and double quotes (quotes removed). */
export function shellWords(text: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < text.length) word += text[++i];
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) throw new Error(`unterminated ${quote} quote in: ${text}`);
  if (inWord) words.push(word);
  return words;
}

/**
 * Splits a shell command at top-level `&&` (outside quotes, `$(...)` and backticks) and reports
 * whether each part has other top-level operators (`;`, `||`, `|`, `&`, redirections).
 */
export function splitAndAnd(command: string): Array<{ text: string; hasOperators: boolean }> {
  const parts: Array<{ text: string; hasOperators: boolean }> = [];
  let start = 0;
  let quote: '"' | "'" | '`' | null = null;
  let depth = 0;
  let ops = false;
  for (let i = 0; i < command.length; i++) {
    const c = command[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      continue;
    }
    if (c === '\\') {
      i++;
      continue;
    }
    if (c === '$' && command[i + 1] === '(') {
      depth++;
      i++;
      continue;
    }
    if (quote === '"' || quote === '`') {
      if (c === quote && depth === 0) quote = null;
      else if (c === ')' && depth > 0) depth--;
      continue;
    }
    if (depth > 0) {
      if (c === ')') depth--;
      else if (c === '"' || c === "'" || c === '`') {
        // Quotes nested in $(...): skip to the matching one.
        const end = command.indexOf(c, i + 1);
        if (end > 0) i = end;
      }
      continue;
    }
    if (c === '"' || c === "'" || c === '`') {
      quote = c;
      continue;
    }
    if (c === '&' && command[i + 1] === '&') {
      parts.push({ text: command.slice(start, i).trim(), hasOperators: ops });
      start = i + 2;
      ops = false;
      i++;
      continue;
    }
    if (c === ';' || c === '|' || c === '&' || c === '>' || c === '<') ops = true;
  }
  parts.push({ text: command.slice(start).trim(), hasOperators: ops });
  return parts;
}

/** Commands that change the machine rather than a directory: never run verbatim by the check. */
const SYSTEM_COMMANDS = /(^|[\s;&|(`])(apt-get|apt|dpkg|useradd|groupadd|usermod|groupmod|adduser|addgroup|update-alternatives|systemctl)(?=\s|$)/;
/** An absolute path in a command (not the `//` of a URL). */
const ABSOLUTE_PATH = /(?:^|[\s=:'"(,])(\/[A-Za-z0-9_.\-][^\s'"`;&|)]*)/;

function intOption(line: number, option: string, value: string | undefined): number {
  if (value === undefined || !/^\d+$/.test(value)) throw new DockerfileError(line, `${option} needs a number, got "${value ?? ''}"`);
  return Number(value);
}

/** Options of useradd/groupadd the check understands (value-taking ones map to true). */
const USERADD_OPTIONS: Record<string, boolean> = {
  '--system': false, '-r': false, '--no-create-home': false, '-M': false, '--no-log-init': false, '-l': false,
  '--uid': true, '-u': true, '--gid': true, '-g': true, '--groups': true, '-G': true, '--home-dir': true, '-d': true, '--shell': true, '-s': true, '--comment': true, '-c': true,
};
const GROUPADD_OPTIONS: Record<string, boolean> = { '--system': false, '-r': false, '--gid': true, '-g': true };

function parseOptions(line: number, cmd: string, words: string[], known: Record<string, boolean>): { options: Map<string, string>; positionals: string[] } {
  const options = new Map<string, string>();
  const positionals: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i];
    if (!w.startsWith('-')) {
      positionals.push(w);
      continue;
    }
    const [flag, inline] = w.includes('=') ? [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)] : [w, undefined];
    if (!(flag in known)) throw new DockerfileError(line, `${cmd} option ${flag} is not understood; ${TEACH}`);
    options.set(flag, known[flag] ? (inline ?? words[++i]) : 'true');
  }
  return { options, positionals };
}

const opt = (o: Map<string, string>, ...names: string[]) => names.map((n) => o.get(n)).find((v) => v !== undefined);

/** Classifies one `&&` part of a RUN command. */
export function classifySegment(line: number, part: { text: string; hasOperators: boolean }): RunSegment {
  const text = part.text;
  if (text === '') throw new DockerfileError(line, 'empty command between && operators');
  let words: string[];
  try {
    words = shellWords(text);
  } catch {
    // Quoting shellWords does not follow (escapes, nested substitutions): only possible in a
    // command run verbatim, which /bin/sh reads itself.
    words = [];
  }
  const [cmd = '', ...args] = words;
  const systemCommand = ['apt-get', 'useradd', 'groupadd'].includes(cmd) || (['mkdir', 'chown', 'ln'].includes(cmd) && ABSOLUTE_PATH.test(text)) || (cmd === 'rm' && text.includes('/var/lib/apt/lists'));
  if (systemCommand && (part.hasOperators || /[$`*?]/.test(text.replace('/var/lib/apt/lists/*', '')))) {
    throw new DockerfileError(line, `"${text}": write it as a plain command joined to the others with && (no ;, ||, pipes, redirections or substitutions), so the check can perform it`);
  }
  if (cmd === 'apt-get') {
    const flags = args.filter((a) => a.startsWith('-'));
    const rest = args.filter((a) => !a.startsWith('-'));
    const allowed = ['-y', '--yes', '-q', '-qq', '--quiet', '--no-install-recommends'];
    const unknown = flags.filter((f) => !allowed.includes(f));
    if (unknown.length) throw new DockerfileError(line, `apt-get option ${unknown.join(' ')} is not understood; ${TEACH}`);
    if (rest[0] === 'update' && rest.length === 1) return { kind: 'apt-update', text };
    if (rest[0] === 'install' && rest.length > 1) {
      if (!flags.includes('-y') && !flags.includes('--yes')) throw new DockerfileError(line, 'apt-get install needs -y: docker build cannot answer its question');
      const bad = rest.slice(1).filter((p) => !/^[a-z0-9][a-z0-9+.\-]*$/.test(p));
      if (bad.length) throw new DockerfileError(line, `apt-get install: "${bad.join(' ')}" is not a plain package name (versions and globs are not understood by the check)`);
      return { kind: 'apt-install', text, packages: rest.slice(1) };
    }
    throw new DockerfileError(line, `"${text}": only "apt-get update" and "apt-get install -y PACKAGES" are understood; ${TEACH}`);
  }
  if (cmd === 'rm' && text.includes('/var/lib/apt/lists')) {
    if (text.replace(/\s+/g, ' ') !== 'rm -rf /var/lib/apt/lists/*') throw new DockerfileError(line, `"${text}": only "rm -rf /var/lib/apt/lists/*" is understood for the apt lists`);
    return { kind: 'apt-clean', text };
  }
  if (cmd === 'groupadd') {
    const { options, positionals } = parseOptions(line, cmd, args, GROUPADD_OPTIONS);
    if (positionals.length !== 1) throw new DockerfileError(line, `groupadd needs exactly one group name, got "${positionals.join(' ')}"`);
    const gid = opt(options, '--gid', '-g');
    return { kind: 'groupadd', text, name: positionals[0], ...(gid !== undefined ? { gid: intOption(line, 'groupadd --gid', gid) } : {}) };
  }
  if (cmd === 'useradd') {
    const { options, positionals } = parseOptions(line, cmd, args, USERADD_OPTIONS);
    if (positionals.length !== 1) throw new DockerfileError(line, `useradd needs exactly one user name, got "${positionals.join(' ')}"`);
    const uid = opt(options, '--uid', '-u');
    const group = opt(options, '--gid', '-g');
    const groups = opt(options, '--groups', '-G');
    const home = opt(options, '--home-dir', '-d');
    return {
      kind: 'useradd',
      text,
      name: positionals[0],
      ...(uid !== undefined ? { uid: intOption(line, 'useradd --uid', uid) } : {}),
      ...(group !== undefined ? { group } : {}),
      groups: groups ? groups.split(',').filter(Boolean) : [],
      ...(home !== undefined ? { home } : {}),
    };
  }
  if (cmd === 'mkdir' && ABSOLUTE_PATH.test(text)) {
    const paths = args.filter((a) => !a.startsWith('-'));
    const flags = args.filter((a) => a.startsWith('-'));
    if (flags.some((f) => f !== '-p') || paths.some((p) => !p.startsWith('/'))) throw new DockerfileError(line, `"${text}": only "mkdir -p /ABSOLUTE/PATH ..." is understood`);
    return { kind: 'mkdir', text, paths };
  }
  if (cmd === 'chown' && ABSOLUTE_PATH.test(text)) {
    const recursive = args.includes('-R');
    const rest = args.filter((a) => a !== '-R');
    if (rest.some((a) => a.startsWith('-')) || rest.length < 2 || rest.slice(1).some((p) => !p.startsWith('/'))) throw new DockerfileError(line, `"${text}": only "chown [-R] USER[:GROUP] /ABSOLUTE/PATH ..." is understood`);
    const [user, group] = rest[0].split(':');
    return { kind: 'chown', text, user, ...(group ? { group } : {}), paths: rest.slice(1), recursive };
  }
  if (cmd === 'ln' && ABSOLUTE_PATH.test(text)) {
    if (args.length !== 3 || args[0] !== '-s' || !args[1].startsWith('/') || !args[2].startsWith('/')) throw new DockerfileError(line, `"${text}": only "ln -s /TARGET /LINK" is understood`);
    return { kind: 'symlink', text, target: args[1], link: args[2] };
  }
  // Performed verbatim on this machine: it must not reach outside the stage's directory.
  const system = SYSTEM_COMMANDS.exec(text);
  if (system) throw new DockerfileError(line, `"${text}": ${system[2]} changes the machine; put it first in its own && part (apt-get update / apt-get install -y ..., useradd, groupadd) so the check can handle it`);
  const absolute = ABSOLUTE_PATH.exec(text);
  if (absolute) {
    throw new DockerfileError(line, `"${text}" uses the absolute path ${absolute[1]}; the check runs this command on the machine itself, not in an image, so it would read or change ${absolute[1]} there. Use a path relative to WORKDIR, or ${TEACH}`);
  }
  return { kind: 'shell', text };
}

function isJsonArray(args: string): boolean {
  try {
    return Array.isArray(JSON.parse(args));
  } catch {
    return false;
  }
}

function jsonArray(line: number, keyword: string, args: string): string[] {
  let value: unknown;
  try {
    value = JSON.parse(args);
  } catch {
    throw new DockerfileError(line, `${keyword} ${args}: not a valid JSON array`);
  }
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) throw new DockerfileError(line, `${keyword}: must be a JSON array of strings`);
  return value as string[];
}

const DURATION = /^(\d+)(ms|s|m|h)$/;
function duration(line: number, option: string, value: string): number {
  const m = DURATION.exec(value);
  if (!m) throw new DockerfileError(line, `HEALTHCHECK ${option}=${value}: not a duration like 30s`);
  return Number(m[1]) * { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
}

function parseHealthcheck(line: number, args: string): HealthCheck {
  const check: HealthCheck = { intervalMs: 30_000, timeoutMs: 30_000, startPeriodMs: 0, retries: 3, command: { shell: '' } };
  let rest = args.trim();
  for (;;) {
    const m = /^--([a-z-]+)=(\S+)\s+/.exec(rest);
    if (!m) break;
    const [, name, value] = m;
    if (name === 'interval') check.intervalMs = duration(line, '--interval', value);
    else if (name === 'timeout') check.timeoutMs = duration(line, '--timeout', value);
    else if (name === 'start-period') check.startPeriodMs = duration(line, '--start-period', value);
    else if (name === 'retries') check.retries = intOption(line, 'HEALTHCHECK --retries', value);
    else throw new DockerfileError(line, `HEALTHCHECK --${name} is not understood; ${TEACH}`);
    rest = rest.slice(m[0].length);
  }
  if (/^NONE$/i.test(rest)) throw new DockerfileError(line, 'HEALTHCHECK NONE: the image must have a health check on /healthz');
  const cmd = /^CMD\s+([\s\S]+)$/i.exec(rest);
  if (!cmd) throw new DockerfileError(line, `HEALTHCHECK: expected [OPTIONS] CMD command, got "${rest}"`);
  const body = cmd[1].trim();
  check.command = body.startsWith('[') ? { exec: jsonArray(line, 'HEALTHCHECK CMD', body) } : { shell: body };
  return check;
}

function parseEnv(line: number, args: string): Array<[string, string]> {
  const words = shellWords(args);
  if (words.length >= 1 && !words[0].includes('=')) {
    // Legacy form `ENV KEY value with spaces`.
    const key = words[0];
    return [[key, args.trim().slice(key.length).trim()]];
  }
  return words.map((w) => {
    const eq = w.indexOf('=');
    if (eq <= 0) throw new DockerfileError(line, `ENV ${w}: expected KEY=VALUE`);
    return [w.slice(0, eq), w.slice(eq + 1)] as [string, string];
  });
}

function parseCopy(line: number, args: string): Step {
  const words = args.trim().startsWith('[') ? jsonArray(line, 'COPY', args) : shellWords(args);
  let from: string | undefined;
  const rest: string[] = [];
  for (const w of words) {
    if (w.startsWith('--from=')) from = w.slice('--from='.length);
    else if (w.startsWith('--')) throw new DockerfileError(line, `COPY option ${w.split('=')[0]} is not understood; ${TEACH}`);
    else rest.push(w);
  }
  if (rest.length < 2) throw new DockerfileError(line, 'COPY needs at least one source and a destination');
  const sources = rest.slice(0, -1);
  const glob = sources.find((s) => /[*?[]/.test(s));
  if (glob) throw new DockerfileError(line, `COPY source ${glob}: wildcards are not understood by the check; name the files`);
  return { kind: 'copy', line, ...(from ? { from } : {}), sources, dest: rest[rest.length - 1] };
}

/** Parses a Dockerfile; throws `DockerfileError` for anything the check cannot perform. */
export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  for (const { line, text: instruction } of logicalLines(text)) {
    const m = /^([A-Za-z]+)(?:\s+([\s\S]*))?$/.exec(instruction);
    if (!m) throw new DockerfileError(line, `cannot read "${instruction}"`);
    const keyword = m[1].toUpperCase();
    const args = (m[2] ?? '').trim();
    if (keyword === 'FROM') {
      const words = shellWords(args);
      if (words.some((w) => w.startsWith('--'))) throw new DockerfileError(line, `FROM option ${words.find((w) => w.startsWith('--'))}: not understood; ${TEACH}`);
      if (!(words.length === 1 || (words.length === 3 && words[1].toUpperCase() === 'AS'))) throw new DockerfileError(line, `FROM ${args}: expected IMAGE [AS NAME]`);
      if (stages.some((s) => s.name === words[0])) throw new DockerfileError(line, `FROM ${words[0]}: building on an earlier stage is not understood; ${TEACH}`);
      stages.push({ index: stages.length, line, image: words[0], ...(words[2] ? { name: words[2] } : {}), steps: [] });
      continue;
    }
    const stage = stages[stages.length - 1];
    if (!stage) throw new DockerfileError(line, `${keyword} before the first FROM`);
    if (args === '') throw new DockerfileError(line, `${keyword} without arguments`);
    // docker build substitutes $VARIABLES in these instructions; the check does not.
    if (['WORKDIR', 'COPY', 'ENV', 'USER', 'VOLUME', 'EXPOSE'].includes(keyword) && args.includes('$')) {
      throw new DockerfileError(line, `${keyword} ${args}: variable substitution is not understood; ${TEACH}`);
    }
    switch (keyword) {
      case 'RUN': {
        // Like Docker: exec form only when the arguments are a valid JSON array (`RUN [[ ... ]]` is shell).
        if (isJsonArray(args)) throw new DockerfileError(line, `RUN in exec (JSON) form is not understood; ${TEACH}`);
        stage.steps.push({ kind: 'run', line, text: args, segments: splitAndAnd(args).map((p) => classifySegment(line, p)) });
        break;
      }
      case 'WORKDIR':
        stage.steps.push({ kind: 'workdir', line, path: args });
        break;
      case 'COPY':
        stage.steps.push(parseCopy(line, args));
        break;
      case 'ENV':
        stage.steps.push({ kind: 'env', line, vars: parseEnv(line, args) });
        break;
      case 'USER':
        stage.steps.push({ kind: 'user', line, user: args });
        break;
      case 'VOLUME':
        stage.steps.push({ kind: 'volume', line, paths: args.startsWith('[') ? jsonArray(line, 'VOLUME', args) : shellWords(args) });
        break;
      case 'EXPOSE': {
        const ports = shellWords(args).map((p) => {
          const pm = /^(\d+)(\/tcp)?$/.exec(p);
          if (!pm) throw new DockerfileError(line, `EXPOSE ${p}: only TCP port numbers are understood`);
          return Number(pm[1]);
        });
        stage.steps.push({ kind: 'expose', line, ports });
        break;
      }
      case 'HEALTHCHECK':
        stage.steps.push({ kind: 'healthcheck', line, check: parseHealthcheck(line, args) });
        break;
      case 'ENTRYPOINT':
      case 'CMD':
        // Shell form would run `/bin/sh -c`, which does not pass SIGTERM on to node.
        if (!args.startsWith('[')) throw new DockerfileError(line, `${keyword} must use the exec (JSON) form: in shell form /bin/sh would receive docker stop's SIGTERM instead of the gateway`);
        stage.steps.push({ kind: keyword === 'CMD' ? 'cmd' : 'entrypoint', line, argv: jsonArray(line, keyword, args) });
        break;
      default:
        throw new DockerfileError(line, `instruction ${keyword} is not understood: ${TEACH}`);
    }
  }
  if (stages.length === 0) throw new DockerfileError(0, 'the Dockerfile has no FROM');
  return stages;
}

/**
 * `.dockerignore` semantics (the subset used here): patterns relative to the context root, `*` and
 * `?` within one path segment, `**` across segments, a leading `!` re-includes; the last matching
 * pattern wins; a path is excluded when it or one of its parent folders is.
 */
export function dockerignoreMatcher(text: string): (relPath: string) => boolean {
  const rules = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = (negate ? l.slice(1) : l).replace(/^\/+/, '').replace(/\/+$/, '');
      let re = '';
      for (let i = 0; i < pattern.length; i++) {
        const c = pattern[i];
        if (c === '*' && pattern[i + 1] === '*') {
          // `**/` matches zero or more folders.
          if (pattern[i + 2] === '/') {
            re += '(?:.*/)?';
            i += 2;
          } else {
            re += '.*';
            i += 1;
          }
        } else if (c === '*') re += '[^/]*';
        else if (c === '?') re += '[^/]';
        else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
      }
      return { negate, re: new RegExp(`^${re}$`) };
    });
  return (relPath: string) => {
    const parts = relPath.split('/').filter(Boolean);
    let excluded = false;
    // Check every prefix (a folder match excludes what is inside it), in rule order.
    for (const rule of rules) {
      for (let n = 1; n <= parts.length; n++) {
        if (rule.re.test(parts.slice(0, n).join('/'))) {
          excluded = !rule.negate;
          break;
        }
      }
    }
    return excluded;
  };
}
