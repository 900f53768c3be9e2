import type { Statement } from 'better-sqlite3';
import type { StatementSource } from '../store/store.js';

/**
 * The dictionary of machine variable names (table `variables`): a row and a chunk store a small
 * integer, the rooms that hand samples out turn it back into the name.
 *
 * Keeps B8: an id created inside a commit that rolls back is forgotten again (`forgetFrom`), so
 * the map never names an id the file does not hold.
 */
export class VariableDictionary {
  private readonly ids = new Map<string, number>();
  private readonly names = new Map<number, string>();
  private readonly insert: Statement;

  constructor(db: StatementSource) {
    this.insert = db.prepare('INSERT INTO variables (name) VALUES (?)');
    for (const [id, name] of db.prepare('SELECT id, name FROM variables').raw(true).all() as Array<[number, string]>) {
      this.ids.set(name, id);
      this.names.set(id, name);
    }
  }

  /** The id of `name`, inserting it (call inside the commit transaction). */
  idOf(name: string): number {
    let id = this.ids.get(name);
    if (id === undefined) {
      id = Number(this.insert.run(name).lastInsertRowid);
      this.ids.set(name, id);
      this.names.set(id, name);
    }
    return id;
  }

  /** The id of `name` if the file has it, without inserting it (outside a commit). */
  find(name: string): number | undefined {
    return this.ids.get(name);
  }

  /** The name of `id` if the file has it. */
  knownName(id: number): string | undefined {
    return this.names.get(id);
  }

  nameOf(id: number): string {
    return this.names.get(id) ?? `#${id}`;
  }

  get size(): number {
    return this.ids.size;
  }

  /** Undoes the entries created after the dictionary had `size` entries (their transaction rolled back). */
  forgetFrom(size: number): void {
    if (this.ids.size === size) return;
    const entries = [...this.ids.entries()];
    for (const [name, id] of entries.slice(size)) {
      this.ids.delete(name);
      this.names.delete(id);
    }
  }
}
