import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * A worker thread running the module at `url`: the compiled `.js` beside the caller in `dist/`,
 * or, when the caller itself runs from TypeScript sources (tests, `npx tsx`), the `.ts` module
 * through tsx's loader, registered inside the worker (a worker does not inherit the parent's
 * loader hooks, and `execArgv: ['--import', 'tsx']` is not honoured for workers).
 */
export function startModuleWorker(url: URL, options: Omit<WorkerOptions, 'eval'> = {}): Worker {
  if (!url.pathname.endsWith('.ts')) return new Worker(url, options);
  const api = import.meta.resolve('tsx/esm/api');
  return new Worker(`import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(url.href)}); })`, { ...options, eval: true });
}

/** `./name.js` next to `importMetaUrl`, or `./name.ts` when that module is itself a `.ts` file. */
export function siblingModule(importMetaUrl: string, name: string): URL {
  return new URL(`./${name}${importMetaUrl.endsWith('.ts') ? '.ts' : '.js'}`, importMetaUrl);
}
