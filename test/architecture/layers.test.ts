import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The layer order of src/ (src/README.md). A file may import from its own layer or a lower one,
 * never from a higher one; rooms on one line are siblings and may import each other. The one
 * exception is the configuration schema, which assembles the section schemas each room owns
 * (buffer/config.ts, http/config.ts, ...) and the source protocols' sections (the descriptor list,
 * sources/plugins.ts) from above.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['core', 'version'],
  ['config'],
  ['store'],
  ['buffer'],
  ['uplink'],
  ['sources'],
  ['status'],
  ['http', 'web'],
  ['annotations', 'fleet', 'console', 'emulator', 'sim'],
  ['runtime'],
  ['commands'],
  ['cli'],
];
const ASSEMBLES_FROM_ABOVE = 'config/schema.ts';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx|mts|js|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The room of a path under src/: its top folder, or the file's name without extension at the top. */
function roomOf(path: string): string {
  const [top, ...rest] = path.split('/');
  return rest.length > 0 ? top : top.replace(/\.[mc]?[jt]sx?$/, '');
}

const layerOf = (room: string): number => LAYERS.findIndex((rooms) => rooms.includes(room));

interface Edge {
  from: string;
  to: string;
}

/** Every relative import of every file under src/ (static, dynamic and type-only), as src/ paths. */
function imports(): Edge[] {
  return sourceFiles(SRC).flatMap((file) => {
    const from = relative(SRC, file);
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    return importedFiles
      .map((i) => i.fileName)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => ({ from, to: relative(SRC, resolve(dirname(file), spec)).replace(/\.js$/, '.ts') }))
      // A .js import of a .tsx file (the browser code) names the .tsx.
      .map((e) => (e.to.endsWith('.ts') && !existsSync(join(SRC, e.to)) && existsSync(join(SRC, `${e.to}x`)) ? { ...e, to: `${e.to}x` } : e));
  });
}

const runsUp = (e: Edge) => layerOf(roomOf(e.to)) > layerOf(roomOf(e.from));

describe('layers: every import points down or sideways', () => {
  const edges = imports();

  it('finds the imports it checks', () => {
    // A parser that found nothing would pass everything.
    expect(edges.length).toBeGreaterThan(500);
    expect(edges).toContainEqual({ from: 'runtime/gateway.ts', to: 'runtime/stages/store.ts' });
    expect(edges).toContainEqual({ from: 'config/schema.ts', to: 'buffer/config.ts' });
  });

  it('places every room of src/ in the layer order', () => {
    const rooms = new Set(sourceFiles(SRC).map((f) => roomOf(relative(SRC, f))));
    expect([...rooms].filter((r) => layerOf(r) < 0), 'rooms missing from LAYERS (and src/README.md)').toEqual([]);
  });

  it('has no import that runs up a layer', () => {
    const up = edges.filter((e) => e.from !== ASSEMBLES_FROM_ABOVE && runsUp(e)).map((e) => `${e.from} -> ${e.to}`);
    expect(up, 'imports that run up the layers (src/README.md)').toEqual([]);
  });

  it('lets the configuration schema take only section schemas and the source protocols from above', () => {
    const fromAbove = edges.filter((e) => e.from === ASSEMBLES_FROM_ABOVE && runsUp(e));
    expect(fromAbove.length).toBeGreaterThan(0);
    expect(fromAbove.filter((e) => !/(^|\/)(config|[a-z-]+-config)\.ts$/.test(e.to) && e.to !== 'sources/plugins.ts').map((e) => e.to)).toEqual([]);
    // Each protocol's section comes through its descriptor, not straight from its config.ts.
    expect(fromAbove.filter((e) => /^sources\/[a-z]+\/config\.ts$/.test(e.to)).map((e) => e.to)).toEqual([]);
  });
});
