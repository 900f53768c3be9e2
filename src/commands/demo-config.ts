import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { isScalar, parseDocument } from 'yaml';
import { loadConfigFile } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { withDemoPorts, type RawDemoSections } from '../sim/plant.js';
import { UsageError } from './flags.js';

/**
 * The demo runs from a real configuration file in its data folder, so the console's
 * Configuration tab shows it and Apply writes it:
 *
 * - first start (no `<data dir>/demo.yaml`): the packaged config/demo.yaml (or --config FILE) is
 *   copied there, with the ports of --ports-from and the folder of --data-dir written in, comments
 *   and formatting kept;
 * - every later start runs from that file as it is, edits included; it is never written over.
 *   --config is then not read (a notice says so), and --ports-from must agree with the file's
 *   ports (else the start is refused: the demo would listen where the file says, not where asked).
 *   Deleting the file starts over from the template at the next start.
 */

export const DEMO_CONFIG_NAME = 'demo.yaml';

export interface DemoConfigFile {
  path: string;
  config: GatewayConfig;
  /** True when this start wrote the file. */
  written: boolean;
  /** What the view should say about the file (kept, flags not read). */
  notes: string[];
}

/** Where the demo's file is: `<data dir>/demo.yaml`, the data dir from --data-dir or the template's gateway.data_dir. */
export function demoConfigPath(template: string, dataDir: string | undefined): string {
  if (dataDir !== undefined) return join(dataDir, DEMO_CONFIG_NAME);
  // Validated as written first, so a mistake in the template is reported against the template.
  return join(loadConfigFile(template, { requireSecrets: false }).config.gateway.data_dir, DEMO_CONFIG_NAME);
}

export function prepareDemoConfig(o: { template: string; templateGiven: boolean; portsFrom?: number; dataDir?: string }): DemoConfigFile {
  const path = demoConfigPath(o.template, o.dataDir);
  const shown = relative(process.cwd(), path).startsWith('..') ? path : relative(process.cwd(), path);
  const notes: string[] = [];
  if (!existsSync(path)) {
    loadConfigFile(o.template);
    const text = demoConfigText(readFileSync(o.template, 'utf8'), o);
    mkdirSync(join(path, '..'), { recursive: true });
    // 'wx': two demos started at once never write over each other's file.
    writeFileSync(path, text, { flag: 'wx' });
    notes.push(`configuration written to ${shown} (from ${o.template}); the demo runs from it, and later starts keep it`);
    return { path, config: loadConfigFile(path).config, written: true, notes };
  }
  if (o.portsFrom !== undefined) {
    const raw = parseDocument(readFileSync(path, 'utf8')).toJS() as RawDemoSections;
    if (JSON.stringify(withDemoPorts(raw, o.portsFrom)) !== JSON.stringify(raw)) {
      throw new UsageError(
        `--ports-from ${o.portsFrom}: the demo runs from ${shown} (written at its first start, kept since), which listens on other ports. ` +
          `Change the ports in that file, delete it to write it again with --ports-from, or use another --data-dir`,
      );
    }
  }
  if (o.templateGiven) notes.push(`--config ${o.template} was not read: the demo runs from ${shown}, written at its first start; delete that file to write it again from ${o.template}`);
  notes.push(`running from ${shown} (kept from an earlier start, with any edits made since)`);
  return { path, config: loadConfigFile(path).config, written: false, notes };
}

const PLAIN = /^[A-Za-z0-9_./][A-Za-z0-9_./:@-]*$/;

/**
 * The template with the ports and data folder asked for, every other byte (comments, alignment)
 * as written: each changed value is replaced where it stands in the text.
 */
export function demoConfigText(template: string, o: { template: string; portsFrom?: number; dataDir?: string }): string {
  const doc = parseDocument(template);
  let raw = doc.toJS() as RawDemoSections & { gateway?: Record<string, unknown>; buffer?: Record<string, unknown> };
  if (o.portsFrom !== undefined) raw = withDemoPorts(raw, o.portsFrom);
  if (o.dataDir !== undefined) raw = { ...raw, gateway: { ...raw.gateway, data_dir: o.dataDir }, buffer: { ...raw.buffer, path: join(o.dataDir, 'buffer.db') } };
  const edits: Array<{ range: [number, number]; text: string }> = [];
  const changed: Array<{ path: Array<string | number>; value: unknown }> = [];
  let missing = false;
  const visit = (value: unknown, path: Array<string | number>) => {
    if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) visit(v, [...path, Array.isArray(value) ? Number(k) : k]);
      return;
    }
    const node = doc.getIn(path, true);
    if (isScalar(node) && node.value === value) return;
    changed.push({ path, value });
    if (isScalar(node) && node.range) edits.push({ range: [node.range[0], node.range[1]], text: typeof value === 'string' && !PLAIN.test(value) ? JSON.stringify(value) : String(value) });
    else missing = true;
  };
  visit(raw, []);
  let text = template;
  if (missing) {
    // A setting the template does not write (http.port, say): set through the document.
    for (const c of changed) doc.setIn(c.path, c.value);
    text = doc.toString({ lineWidth: 0 });
  } else {
    for (const e of edits.sort((a, b) => b.range[0] - a.range[0])) text = `${text.slice(0, e.range[0])}${e.text}${text.slice(e.range[1])}`;
  }
  const flags = [o.portsFrom !== undefined ? `--ports-from ${o.portsFrom}` : '', o.dataDir !== undefined ? `--data-dir ${o.dataDir}` : ''].filter(Boolean).join(' ');
  const header = [
    `# Written by \`edge-gateway demo\` at its first start, from ${o.template}${flags ? ` (${flags})` : ''}.`,
    '# The demo runs from this file and keeps it: later starts read it as it is, with your edits (the',
    "# console's Build the config → Configuration tab edits it, Apply writes it and reloads the gateway).",
    '# To start over from the packaged configuration, stop the demo and delete this file.',
    '',
  ];
  return `${header.join('\n')}\n${text}`;
}
