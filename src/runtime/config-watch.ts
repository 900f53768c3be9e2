import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';

/**
 * Calls `onChange` when a file changes, however it is written: in place (`>`), by an editor that
 * writes a temporary file and renames it over the original, or by a Kubernetes ConfigMap swapping
 * a symlink. Watching the file itself would miss the last two (the watched inode is replaced), so
 * the directory is watched and events are filtered by name. Bursts of events from one save are
 * debounced into one call.
 */
export function watchFile(path: string, onChange: () => void, debounceMs = 300): () => void {
  const name = basename(path);
  let timer: NodeJS.Timeout | null = null;
  let watcher: FSWatcher | null = null;
  try {
    watcher = watch(dirname(path), { persistent: false }, (_event, file) => {
      // `file` can be null on some platforms; then any change in the directory counts.
      if (file !== null && file !== name && !String(file).startsWith('..data')) return;
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        timer = null;
        onChange();
      }, debounceMs);
    });
    watcher.on('error', () => undefined);
  } catch {
    // A directory that cannot be watched (some network file systems): SIGHUP still works.
    return () => undefined;
  }
  return () => {
    if (timer) clearTimeout(timer);
    watcher?.close();
  };
}
