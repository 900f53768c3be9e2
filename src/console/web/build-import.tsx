import { h, Fragment } from 'preact';
import type { ImportCsvResponse } from '../api/build.js';
import { Diff } from './build-diff.js';

/** What the last CSV import did, shown above the editor until the text is edited again. */
export type Imported = ImportCsvResponse & { file: string };

/**
 * The result of a CSV import: counts, where the rows went, the changes to mappings the text already
 * has (listed until confirmed: `onMakeChanges` imports again with them made), the rows whose
 * variable the organisation's catalog does not list, every row left out with its field and value,
 * and the diff.
 */
export function ImportReport({ r, onMakeChanges }: { r: Imported; onMakeChanges: () => void }) {
  const bad = r.problems.length + r.more_problems;
  const pending = r.changes.filter((c) => !c.applied);
  return (
    <div class="preview" data-testid="import-report">
      <h3 data-testid="import-summary">
        {r.file}: {r.rows} row{r.rows === 1 ? '' : 's'}, {r.added} added, {r.updated} changed, {r.unchanged} already in the configuration, {bad} left out: not written yet; Apply shows the changes to the file
      </h3>
      {r.targets.length ? (
        <p class="small">
          {r.targets.map((t, i) => (
            <span>
              {i ? '; ' : ''}
              {t.added} to <span class="mono">{t.target}</span> ({t.source}
              {t.created ? ', new' : ''})
            </span>
          ))}
        </p>
      ) : (
        ''
      )}
      {r.changes.length ? (
        <>
          <p class={pending.length ? 'hint warn small' : 'small'} data-testid="import-changes-note">
            {pending.length
              ? pending.length + r.more_changes === 1
                ? '1 row would change a mapping the text already has; the change is not in the text until you make it:'
                : `${pending.length + r.more_changes} rows would change mappings the text already has; the changes are not in the text until you make them:`
              : `${r.updated} mapping${r.updated === 1 ? '' : 's'} changed in the text:`}
          </p>
          <ul class="problems" data-testid="import-changes">
            {r.changes.map((c) => (
              <li class={c.applied ? '' : 'warn'}>
                <span class="dot"></span>
                <span>
                  <b>row {c.row}</b> · <span class="mono">{c.variable}</span> ({c.setting}): <span class="mono">{c.before}</span> → <span class="mono">{c.after}</span>
                </span>
              </li>
            ))}
          </ul>
          {pending.length ? (
            <button class="primary" onClick={onMakeChanges} data-testid="import-make-changes">
              Make {pending.length === 1 ? 'this change' : `these ${pending.length} changes`}
            </button>
          ) : (
            ''
          )}
        </>
      ) : (
        ''
      )}
      <CatalogFlags r={r} />
      {r.problems.length ? (
        <ul class="problems" data-testid="import-problems">
          {r.problems.map((p) => (
            <li class="warn">
              <span class="dot"></span>
              <span>
                <b>row {p.row}</b>
                {p.field ? (
                  <>
                    {' '}
                    · <span class="mono">{p.field}</span>
                    {p.value ? <span class="mono"> "{p.value}"</span> : ''}
                  </>
                ) : (
                  ''
                )}
                : {p.message}
              </span>
            </li>
          ))}
          {r.more_problems ? (
            <li class="warn">
              <span class="dot"></span>… and {r.more_problems} more
            </li>
          ) : (
            ''
          )}
        </ul>
      ) : (
        ''
      )}
      {r.diff ? <Diff text={r.diff} /> : ''}
    </div>
  );
}

/** The rows the organisation's catalog does not agree with, in row order: an id it lacks, a unit other than its own. */
function CatalogFlags({ r }: { r: Imported }) {
  if (r.not_in_catalog === null) return <p class="muted small" data-testid="import-catalog">The variables were not checked against the organisation's catalog (it has not been read).</p>;
  const flags = [
    ...r.not_in_catalog.map((n) => ({ row: n.row, variable: n.variable, text: "not in the organisation's catalog; the service will refuse its samples (create it there, or fix the id)" })),
    ...(r.other_units ?? []).map((n) => ({ row: n.row, variable: n.variable, text: `unit "${n.unit}", but the organisation's catalog gives "${n.catalog}" (check the scale and offset, then the unit)` })),
  ].sort((a, b) => a.row - b.row);
  const more = r.more_not_in_catalog + r.more_other_units;
  if (flags.length === 0) return null;
  return (
    <ul class="problems" data-testid="import-catalog">
      {flags.map((f) => (
        <li class="warn">
          <span class="dot"></span>
          <span>
            <b>row {f.row}</b> · <span class="mono">{f.variable}</span>: {f.text}
          </span>
        </li>
      ))}
      {more ? (
        <li class="warn">
          <span class="dot"></span>… and {more} more
        </li>
      ) : (
        ''
      )}
    </ul>
  );
}
