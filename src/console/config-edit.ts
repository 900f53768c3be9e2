import { createHash, createHmac, randomBytes } from 'node:crypto';
import { closeSync, fchmodSync, fchownSync, fstatSync, fsyncSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { isAlias, isMap, isScalar, isSeq, parseDocument, type Node } from 'yaml';
import { isSecretPath, pathText, secretFieldPatterns, secretUses, type SecretUse } from '../config/secret-fields.js';
import { lineDiff } from '../config/text-diff.js';
import type { CheckProblem, SecretChange } from './api/config.js';

/**
 * What the console's configuration editor does with the file's text besides checking it
 * (issue 21 §3): hide every secret written in it, put the hidden ones back on Apply, list the
 * changes that send a secret somewhere new, show the diff, and write the file keeping its mode,
 * owner, formatting and comments.
 */

// --- Hiding secrets ------------------------------------------------------------------------------

/**
 * A secret written in the file shows as this placeholder; posted back unchanged, Apply keeps the
 * secret. The tag is an HMAC of the value under a key made at start, so it names which secret
 * without telling anything about it (and an edit that moves settings around keeps its secrets).
 */
const PLACEHOLDER = /^\(hidden secret ([0-9a-f]{12}), kept on Apply\)$/;
/** What the console showed before issue 21; posted back, it is refused with a clear message. */
const OLD_MARKER = '(hidden: written in the file)';
let tagKey = randomBytes(32);

/**
 * The key of the placeholders' tags: the console's text worker (text-worker.ts) is given the
 * gateway's, so a placeholder shown before the worker was ended and started again still names its
 * secret.
 */
export function usePlaceholderKey(key: Uint8Array): void {
  tagKey = Buffer.from(key);
}

/** This thread's key of the placeholders' tags (given to the text worker). */
export function placeholderKey(): Uint8Array {
  return new Uint8Array(tagKey);
}

function placeholder(value: string): string {
  return `(hidden secret ${createHmac('sha256', tagKey).update(value).digest('hex').slice(0, 12)}, kept on Apply)`;
}

interface ScalarAt {
  path: Array<string | number>;
  value: string;
  /** Offsets of the value in the text: [start, end). */
  range: [number, number];
}

/**
 * Every string scalar of a YAML text with its setting path and position. A scalar reached through
 * an alias (`password: *pw`) is listed under the alias's path with the anchored node's position, so
 * a secret written once as an anchor is hidden where it is written.
 */
function stringScalars(text: string): { scalars: ScalarAt[]; broken: boolean } {
  const doc = parseDocument(text, { uniqueKeys: false });
  const scalars: ScalarAt[] = [];
  const walk = (node: unknown, path: Array<string | number>, depth: number): void => {
    if (depth > 70) return;
    if (isAlias(node)) {
      const target = node.resolve(doc);
      if (isScalar(target)) walk(target, path, depth + 1);
    } else if (isMap(node)) {
      for (const pair of node.items) if (isScalar(pair.key)) walk(pair.value, [...path, String(pair.key.value)], depth + 1);
    } else if (isSeq(node)) {
      node.items.forEach((item, i) => walk(item, [...path, i], depth + 1));
    } else if (isScalar(node) && typeof node.value === 'string' && (node as Node).range) {
      const r = (node as Node).range!;
      scalars.push({ path, value: node.value, range: [r[0], r[1]] });
    }
  };
  walk(doc.contents, [], 0);
  return { scalars, broken: doc.errors.length > 0 };
}

/** Setting names that hold secrets, for texts that do not parse (the last part of each secret setting). */
const SECRET_NAMES = [...new Set(secretFieldPatterns().map((p) => p.slice(p.lastIndexOf('.') + 1)))];
/** `name: value` of a secret setting, in block or flow style: a quoted scalar or plain text up to a comma, bracket or comment. */
const SECRET_VALUE = new RegExp(`(\\b(?:${SECRET_NAMES.join('|')})\\s*:[ \\t]*)("(?:[^"\\\\\\n]|\\\\.)*"?|'[^'\\n]*'?|[^\\s,{}\\[\\]#][^,{}\\[\\]#\\n]*)`, 'g');

/**
 * The text with every secret written in it replaced by its placeholder; everything else, comments
 * and formatting included, is left as it is. A text that is not valid YAML is masked line by line
 * (every value of a setting named like a secret), so a broken file never shows one either.
 */
export function maskSecrets(text: string): string {
  const { scalars, broken } = stringScalars(text);
  let out = text;
  const ranges = new Map<number, ScalarAt>();
  for (const s of scalars) if (isSecretPath(s.path) && !PLACEHOLDER.test(s.value)) ranges.set(s.range[0], s);
  const secrets = [...ranges.values()].sort((x, y) => y.range[0] - x.range[0]);
  for (const s of secrets) out = `${out.slice(0, s.range[0])}${JSON.stringify(placeholder(s.value))}${out.slice(s.range[1])}`;
  if (broken) out = maskSecretsByLines(out);
  return out;
}

/**
 * Every value of a setting named like a secret replaced by `"(hidden)"`, line by line, without
 * parsing the text: for a text that is not YAML, and for a file too large to edit in the console
 * (linear in its size; a placeholder never goes back to the file, as such a file is not applied
 * from the console).
 */
export function maskSecretsByLines(text: string): string {
  return text.replace(SECRET_VALUE, (_m, head: string) => `${head}"(hidden)"`);
}

/**
 * The posted text with each placeholder replaced by the secret it stands for, taken from the
 * current file (written as it was there). A placeholder for no secret of the file, or outside a
 * secret setting, is a problem naming its line.
 */
export function unmaskSecrets(posted: string, current: string | null): { text: string; problems: CheckProblem[] } {
  const known = new Map<string, { value: string; source: string }>();
  if (current !== null) {
    for (const s of stringScalars(current).scalars) {
      if (!isSecretPath(s.path)) continue;
      const source = current.slice(s.range[0], s.range[1]);
      known.set(placeholder(s.value), { value: s.value, source: source.includes('\n') ? JSON.stringify(s.value) : source });
    }
  }
  const problems: CheckProblem[] = [];
  const lineAt = (offset: number) => posted.slice(0, offset).split('\n').length;
  let text = posted;
  // One entry per position: a placeholder reached through aliases is judged where it is written.
  const at = new Map<number, ScalarAt>();
  for (const s of stringScalars(posted).scalars) if ((PLACEHOLDER.test(s.value) || s.value === OLD_MARKER) && (!at.has(s.range[0]) || !isSecretPath(s.path))) at.set(s.range[0], s);
  const hidden = [...at.values()].sort((x, y) => y.range[0] - x.range[0]);
  for (const s of hidden) {
    const where = pathText(s.path) || '(top level)';
    const original = known.get(s.value);
    if (!isSecretPath(s.path)) problems.push({ path: where, line: lineAt(s.range[0]), message: `${where}: holds the placeholder of a hidden secret, but it is not a secret setting` });
    else if (!original) problems.push({ path: where, line: lineAt(s.range[0]), message: `${where}: this hidden secret is not in the configuration file (any more); type the secret again or write it as { env: VARIABLE }` });
    else text = `${text.slice(0, s.range[0])}${original.source}${text.slice(s.range[1])}`;
  }
  return { text, problems: problems.reverse() };
}

// --- What an edit changes ------------------------------------------------------------------------

/** A secret an edit sends somewhere new: the shared model of the console's API (api/config.ts). */
export type { SecretChange };

/**
 * The Apply rule (issue 21 §3, README "Commissioning console"): an edit may not, unconfirmed, make
 * the gateway send a secret somewhere it did not send it before. Each secret of the new text is a
 * (secret, destination) pair: the secret is its reference (`{env: NAME}`, `{file: PATH}`) or, when
 * written in the file, its value; the destination is the peer of the section holding it. A pair
 * not in the current file is a change when the secret is a reference (a new reference, or an
 * existing one pointed at a new peer) or a value the current file already holds (moved to a new
 * peer); a value the editor typed is theirs to send anywhere. Both configurations are validated
 * without reading secrets (`withoutReadingSecrets`), so the references are compared, not values
 * read from files.
 */
export function secretChanges(current: unknown, next: unknown): SecretChange[] {
  // A current file that does not validate (null): every reference of the new text is new.
  const before: SecretUse[] = current === null ? [] : secretUses(current);
  const identity = (u: SecretUse) => (u.ref === 'literal' ? `literal:${createHash('sha256').update(u.secret.reveal()).digest('hex')}` : u.ref);
  const known = new Set(before.map(identity));
  const pairs = new Set(before.flatMap((u) => u.destinations.map((d) => `${identity(u)}\u0000${d}`)));
  const changes: SecretChange[] = [];
  for (const use of secretUses(next)) {
    const id = identity(use);
    if (use.ref === 'literal' && !known.has(id)) continue;
    for (const destination of use.destinations) {
      if (pairs.has(`${id}\u0000${destination}`)) continue;
      changes.push({
        setting: use.path,
        secret: use.ref === 'literal' ? 'a secret written in the file' : use.ref,
        destination,
        reason: known.has(id) ? 'existing secret sent to a new destination' : 'new secret reference',
      });
    }
  }
  return changes;
}

/** The diff shown before Apply, between the file and the posted text, both with their secrets hidden. */
export function configDiff(currentText: string | null, nextText: string): string {
  return lineDiff(maskedForDiff(currentText ?? ''), maskedForDiff(nextText));
}

/** Texts above this size are masked by their lines (maskSecretsByLines), not read into a document. */
const MASK_BY_DOCUMENT_MAX_CHARS = 256 * 1024;

function maskedForDiff(text: string): string {
  return text.length > MASK_BY_DOCUMENT_MAX_CHARS ? maskSecretsByLines(text) : maskSecrets(text);
}

/** What the second request of a confirmed Apply sends back: names exactly the diff that was shown. */
export function confirmationOf(diff: string): string {
  return createHash('sha256').update(diff).digest('hex').slice(0, 16);
}

// --- Writing the file ----------------------------------------------------------------------------

/**
 * Replaces the configuration file: written beside it with the file's own mode and owner (issue 21
 * §3: a 0600 file became 0640), fsynced, renamed over it, directory fsynced, so a power cut leaves
 * the old file or the new one, never half of each. When the owner cannot be kept (the gateway runs
 * as another user), nothing is written.
 */
export function writeConfigFile(path: string, text: string): void {
  const fd0 = openSync(path, 'r');
  let st;
  try {
    st = fstatSync(fd0);
  } finally {
    closeSync(fd0);
  }
  // A name of its own (opened with 'wx'): two writes never share a temporary file.
  const tmp = join(dirname(path), `.${randomBytes(6).toString('hex')}.console.tmp`);
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    try {
      if (process.getuid?.() !== st.uid || process.getgid?.() !== st.gid) fchownSync(fd, st.uid, st.gid);
    } catch (err) {
      throw new Error(`cannot keep the owner ${st.uid}:${st.gid} of ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'}); nothing was written`, { cause: err });
    }
    fchmodSync(fd, st.mode & 0o7777);
    writeSync(fd, text);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    unlinkSync(tmp);
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, path);
  const dir = openSync(dirname(path), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}
