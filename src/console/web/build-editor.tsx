import { h, Fragment } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { ImportCsvResponse, MappingsResponse } from '../api/build.js';
import type { ConfigApplyRefusal, ConfigApplyResponse, ConfigCheckResponse, ConfigPreviewResponse, ConfigReadResponse } from '../api/config.js';
import { fmtTime } from '../../web/format.js';
import { api, ApiError, messageOf } from './lib.js';
import type { Added } from './page-build.js';
import { ConfigHistoryPanel } from './build-history.js';
import { ImportReport, type Imported } from './build-import.js';
import { Diff } from './build-diff.js';

/** The check shown next to the editor: the last check, or the problems a preview or Apply found. */
interface CheckShown {
  ok: boolean;
  problems: Array<{ line: number | null; message: string }>;
  more_problems?: number;
  warnings?: string[];
}
type Preview = Extract<ConfigPreviewResponse, { ok: true }>;

/** Offset of the first character of 1-based line `line` in `text` (the end of the text past its last line). */
export function lineStart(text: string, line: number): number {
  let at = 0;
  for (let n = 1; n < line; n++) {
    const nl = text.indexOf('\n', at);
    if (nl < 0) return text.length;
    at = nl + 1;
  }
  return at;
}

/** A CSV file as text: UTF-8 (a byte order mark is dropped later), or Windows-1252 when it is not UTF-8 (an older Excel's "CSV"). */
async function readCsvFile(file: File): Promise<string> {
  const bytes = await file.arrayBuffer();
  const utf8 = new TextDecoder('utf-8').decode(bytes);
  return utf8.includes('\uFFFD') ? new TextDecoder('windows-1252').decode(bytes) : utf8;
}

/** Build the config → Configuration: the file's text, checked as it is typed; Apply shows the diff first. */
export function ConfigEditor({ text, setText, added }: { text: string; setText: (t: string) => void; added: Added | null }) {
  const area = useRef<HTMLTextAreaElement>(null);
  const gutter = useRef<HTMLPreElement>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  const [imported, setImported] = useState<Imported | null>(null);
  const [csvNote, setCsvNote] = useState<string | null>(null);
  // The line numbers follow the text's scroll (they are a separate element beside the textarea).
  const syncGutter = () => {
    if (area.current && gutter.current) gutter.current.scrollTop = area.current.scrollTop;
  };
  useEffect(syncGutter, [text]);
  /** A problem's line: selected in the text and scrolled into view (a third from the top). */
  const goToLine = (line: number) => {
    const ta = area.current;
    if (!ta) return;
    const start = lineStart(text, line);
    const nl = text.indexOf('\n', start);
    ta.focus({ preventScroll: true });
    ta.setSelectionRange(start, nl < 0 ? text.length : nl);
    const style = getComputedStyle(ta);
    const lh = parseFloat(style.lineHeight) || 18;
    ta.scrollTop = Math.max(0, parseFloat(style.paddingTop) + (line - 1) * lh - ta.clientHeight / 3);
    syncGutter();
    ta.scrollIntoView({ block: 'nearest' });
  };
  const exportCsv = async () => {
    setCsvNote(null);
    try {
      const r = await api<MappingsResponse>('/console/api/config/mappings', { method: 'POST', body: { yaml: text } });
      // The byte order mark makes Excel read the file as UTF-8.
      const url = URL.createObjectURL(new Blob([`\uFEFF${r.csv}`], { type: 'text/csv;charset=utf-8' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = 'mappings.csv';
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      setCsvNote(`Exported ${r.rows} mapping${r.rows === 1 ? '' : 's'} to mappings.csv.`);
    } catch (e) {
      setCsvNote(`Export failed: ${messageOf(e)}`);
    }
  };
  // The text and the file of the last import: its changes to existing mappings are made on confirm,
  // by importing the same file into the same text again with `update`.
  const lastImport = useRef<{ yaml: string; csv: string; file: string } | null>(null);
  const importCsv = async (file: File) => {
    setCsvNote(null);
    try {
      const csv = await readCsvFile(file);
      const r = await api<ImportCsvResponse>('/console/api/config/import-csv', { method: 'POST', body: { yaml: text, csv } });
      lastImport.current = { yaml: text, csv, file: file.name };
      setText(r.yaml);
      setImported({ ...r, file: file.name });
    } catch (e) {
      setImported(null);
      setCsvNote(`Import of ${file.name} failed: ${messageOf(e)}`);
    }
  };
  const makeChanges = async () => {
    const last = lastImport.current;
    if (!last) return;
    try {
      const r = await api<ImportCsvResponse>('/console/api/config/import-csv', { method: 'POST', body: { yaml: last.yaml, csv: last.csv, update: true } });
      setText(r.yaml);
      setImported({ ...r, file: last.file });
    } catch (e) {
      setCsvNote(`The changes of ${last.file} were not made: ${messageOf(e)}`);
    }
  };
  const [path, setPath] = useState<string | null>(null);
  const [check, setCheck] = useState<CheckShown | null>(null);
  const [note, setNote] = useState<{ ok: boolean; text: string } | null>(null);
  const [preview, setPreview] = useState<Preview | null>(null);
  // Why there is no file to write: the gateway's note, or why the file could not be read.
  const [noFile, setNoFile] = useState<string | null>('reading the configuration file…');
  // Changes after each Apply, so the history shows the version it kept.
  const [written, setWritten] = useState(0);
  const readFile = () =>
    api<ConfigReadResponse>('/console/api/config').then(
      (r) => {
        setPath(r.path);
        setNoFile(r.path === null ? `${r.note}; start it with --config FILE to edit and apply it here` : null);
        if (r.yaml) setText(r.yaml);
      },
      (e: unknown) => {
        setNoFile(`the configuration file could not be read: ${messageOf(e)}`);
        setNote({ ok: false, text: messageOf(e) });
      },
    );
  useEffect(() => void readFile(), []);
  useEffect(() => {
    if (!text) return;
    setPreview(null);
    const t = setTimeout(
      () =>
        api<ConfigCheckResponse>('/console/api/config/check', { method: 'POST', body: { yaml: text } }).then(setCheck, (e: unknown) => setCheck({ ok: false, problems: [{ line: null, message: messageOf(e) }] })),
      600,
    );
    return () => clearTimeout(t);
  }, [text]);
  // Apply shows the diff first (and any secret sent somewhere new); the second step sends the
  // confirmation of exactly that diff (issue 21 §3).
  const review = async () => {
    setNote(null);
    try {
      const r = await api<ConfigPreviewResponse>('/console/api/config/preview', { method: 'POST', body: { yaml: text } });
      if (!r.ok) {
        setCheck({ ok: false, problems: r.problems, more_problems: r.more_problems });
        return;
      }
      setPreview(r);
    } catch (e) {
      setNote({ ok: false, text: messageOf(e) });
    }
  };
  const apply = async () => {
    if (!preview) return;
    try {
      const r = await api<ConfigApplyResponse>('/console/api/config', { method: 'PUT', body: { yaml: text, confirm: preview.confirm } });
      setPreview(null);
      setWritten((n) => n + 1);
      setNote({ ok: true, text: `Written to ${r.written}${r.version ? ` (version ${r.version} in its history)` : ''}. Changed: ${r.changed.join(', ') || 'nothing'}${r.restart_required.length ? `; needs a restart: ${r.restart_required.join(', ')}` : ''}.` });
    } catch (e) {
      const body = e instanceof ApiError ? (e.body as ConfigApplyRefusal | null) : null;
      if (body?.confirm) setPreview({ ...preview, diff: body.diff ?? '', confirm: body.confirm, secret_changes: body.secret_changes ?? [] });
      else setPreview(null);
      setNote({ ok: false, text: messageOf(e) });
      if (body?.problems) setCheck({ ok: false, problems: body.problems, more_problems: body.more_problems });
    }
  };
  const lines = text.split('\n').length;
  const count = check ? check.problems.length + (check.more_problems ?? 0) : 0;
  // Issue 24 §2: a disabled Apply says why.
  const applyBlocked = noFile ?? (!text.trim() ? 'the editor is empty' : !check ? 'the text is being checked…' : !check.ok ? `the check finds ${count} problem${count === 1 ? '' : 's'} (listed below); Apply is possible once it passes` : null);
  const more = check?.more_problems ? (
    <li class="bad">
      <span class="dot"></span>… and {check.more_problems} more
    </li>
  ) : (
    ''
  );
  return (
    <section class="card">
      <div class="card-head">
        <h2>Configuration {path ? <span class="muted small mono">{path}</span> : ''}</h2>
        <div class="row">
          <span class={`pill ${check ? (check.ok ? 'ok' : 'bad') : 'warn'}`} data-testid="check-state">
            {check ? (check.ok ? 'check passes' : `${count} problem${count === 1 ? '' : 's'}`) : 'not checked'}
          </span>
          <button class="primary" disabled={applyBlocked !== null} title={applyBlocked ?? undefined} onClick={review} data-testid="apply-config">
            Apply…
          </button>
        </div>
      </div>
      {applyBlocked ? (
        <p class="hint warn small" data-testid="apply-reason">
          Apply is not possible: {applyBlocked}
        </p>
      ) : (
        ''
      )}
      {added ? (
        <div class="preview" data-testid="added-to-config">
          <h3>
            {added.added === 0 ? 'Nothing added' : `Added ${added.added} mapping${added.added === 1 ? '' : 's'} to `}
            {added.added ? <span class="mono">{added.target}</span> : ''}
            {added.created ? ' (new)' : ''}: not written yet; Apply shows the changes to the file
          </h3>
          {added.skipped.length ? (
            <ul class="problems" data-testid="added-skipped">
              {added.skipped.map((k) => (
                <li class="warn">
                  <span class="dot"></span>
                  <span>
                    <b class="mono">{k.what}</b> left out: {k.reason}
                  </span>
                </li>
              ))}
            </ul>
          ) : (
            ''
          )}
          {added.diff ? <Diff text={added.diff} /> : ''}
        </div>
      ) : (
        ''
      )}
      <p class="muted small">
        Paste or edit a configuration: it is checked as you type, as <code>edge-gateway check</code> does. Secrets written in the file show hidden and are kept as they are. Apply shows the changes first, then writes the file and reloads the gateway.
      </p>
      <div class="row csv-tools">
        <button onClick={exportCsv} disabled={!text.trim()} title="every mapping of the text as CSV (docs/mappings-csv.md)" data-testid="export-csv">
          Export mappings (CSV)
        </button>
        <button onClick={() => fileInput.current?.click()} title="add the rows of a CSV file to the text; nothing is written until Apply" data-testid="import-csv">
          Import CSV…
        </button>
        <input
          type="file"
          accept=".csv,text/csv"
          hidden
          ref={fileInput}
          onChange={(e) => {
            const file = e.currentTarget.files?.[0];
            e.currentTarget.value = '';
            if (file) void importCsv(file);
          }}
          data-testid="import-csv-file"
        />
        {csvNote ? (
          <span class="small muted" data-testid="csv-note">
            {csvNote}
          </span>
        ) : (
          ''
        )}
      </div>
      {imported ? <ImportReport r={imported} onMakeChanges={() => void makeChanges()} /> : ''}
      <div class="editor">
        <pre class="gutter" ref={gutter} data-testid="config-gutter">
          {Array.from({ length: lines }, (_, i) => `${i + 1}\n`).join('')}
        </pre>
        <textarea
          ref={area}
          spellcheck={false}
          wrap="off"
          value={text}
          onInput={(e) => {
            setImported(null);
            setText(e.currentTarget.value);
          }}
          onScroll={syncGutter}
          data-testid="config-text"
        ></textarea>
      </div>
      {check && !check.ok ? (
        <ul class="problems" data-testid="check-problems">
          {check.problems.map((p) => (
            <li class="bad">
              <span class="dot"></span>
              <span>
                {p.line ? (
                  <>
                    <button class="linklike" onClick={() => goToLine(p.line!)} title="show this line in the text" data-testid={`problem-line-${p.line}`}>
                      line {p.line}
                    </button>{' '}
                    ·{' '}
                  </>
                ) : (
                  ''
                )}
                {p.message}
              </span>
            </li>
          ))}
          {more}
        </ul>
      ) : (
        ''
      )}
      {check?.ok && check.warnings?.length ? (
        <ul class="problems">
          {check.warnings.map((w) => (
            <li class="warn">
              <span class="dot"></span>
              {w}
            </li>
          ))}
        </ul>
      ) : (
        ''
      )}
      {preview ? (
        <div class="preview" data-testid="config-preview">
          <h3>Changes to {path}</h3>
          {preview.secret_changes.length ? (
            <>
              <p class={preview.refused ? 'err-line' : 'muted small'}>{preview.refused ? preview.message : 'These changes send secrets where they were not sent before; check each destination:'}</p>
              <ul class="problems" data-testid="secret-changes">
                {preview.secret_changes.map((c) => (
                  <li class={preview.refused ? 'bad' : 'warn'}>
                    <span class="dot"></span>
                    <span>
                      <b class="mono">{c.setting}</b>: {c.secret} → <b class="mono">{c.destination}</b> ({c.reason})
                    </span>
                  </li>
                ))}
              </ul>
            </>
          ) : (
            ''
          )}
          <Diff text={preview.diff} />
          {preview.catalog?.flags.length ? (
            <>
              <p class="muted small">Against the organisation's catalog (read {preview.catalog.read_at ? fmtTime(preview.catalog.read_at) : '–'}):</p>
              <ul class="problems" data-testid="catalog-flags">
                {preview.catalog.flags.map((f) => (
                  <li class="warn">
                    <span class="dot"></span>
                    {f}
                  </li>
                ))}
              </ul>
            </>
          ) : (
            ''
          )}
          <div class="row">
            <button class="primary" disabled={preview.refused || !preview.diff} onClick={apply} data-testid="confirm-apply">
              {preview.secret_changes.length ? 'Send the secrets there and apply' : 'Apply these changes'}
            </button>
            <button onClick={() => setPreview(null)} data-testid="cancel-apply">
              Cancel
            </button>
          </div>
        </div>
      ) : (
        ''
      )}
      {note ? (
        <p class={note.ok ? 'ok-line' : 'err-line'} data-testid="apply-note">
          {note.text}
        </p>
      ) : (
        ''
      )}
      {path ? (
        <ConfigHistoryPanel
          refresh={written}
          onRolledBack={(text) => {
            setNote({ ok: true, text });
            void readFile();
          }}
        />
      ) : (
        ''
      )}
    </section>
  );
}
