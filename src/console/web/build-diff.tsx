import { h } from 'preact';

/** The diff Apply would make, line by line, coloured like a unified diff. */
export function Diff({ text }: { text: string }) {
  if (!text)
    return (
      <p class="muted" data-testid="config-diff">
        No changes: the text is the file as it is.
      </p>
    );
  const cls = (l: string) => (l.startsWith('@@') ? 'hunk' : l[0] === '+' ? 'add' : l[0] === '-' ? 'del' : '');
  return (
    <pre class="code diff" data-testid="config-diff">
      {text
        .replace(/\n$/, '')
        .split('\n')
        .map((l) => (
          <span class={cls(l)}>{`${l}\n`}</span>
        ))}
    </pre>
  );
}
