/**
 * A unified line diff (`-` removed, `+` added, ` ` context, `@@ -a,b +c,d @@` hunk heads) of two
 * texts, for showing an edit before it is applied (the console's Apply). The common start and end
 * are trimmed first; the middle is diffed by longest common subsequence when it is small enough
 * (MAX_CELLS), else shown as one block replaced, so a diff of any two texts costs a bounded time.
 */
const MAX_CELLS = 1_000_000;

type Op = { kind: ' ' | '-' | '+'; text: string; a: number; b: number };

export function lineDiff(before: string, after: string, context = 3): string {
  if (before === after) return '';
  const a = before.split('\n');
  const b = after.split('\n');
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const ops: Op[] = [];
  for (let i = 0; i < start; i++) ops.push({ kind: ' ', text: a[i], a: i, b: i });
  ops.push(...middle(a, b, start, endA, endB));
  for (let i = 0; i < a.length - endA; i++) ops.push({ kind: ' ', text: a[endA + i], a: endA + i, b: endB + i });
  return hunks(ops, context);
}

function middle(a: string[], b: string[], start: number, endA: number, endB: number): Op[] {
  const n = endA - start;
  const m = endB - start;
  const out: Op[] = [];
  if (n * m > MAX_CELLS) {
    for (let i = 0; i < n; i++) out.push({ kind: '-', text: a[start + i], a: start + i, b: start });
    for (let j = 0; j < m; j++) out.push({ kind: '+', text: b[start + j], a: endA, b: start + j });
    return out;
  }
  // lcs[i][j]: length of the longest common subsequence of a[start+i..] and b[start+j..].
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[start + i] === b[start + j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[start + i] === b[start + j]) {
      out.push({ kind: ' ', text: a[start + i], a: start + i, b: start + j });
      i++;
      j++;
    } else if (i < n && (j === m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      // Removals before additions, as diff(1) shows a changed line.
      out.push({ kind: '-', text: a[start + i], a: start + i, b: start + j });
      i++;
    } else {
      out.push({ kind: '+', text: b[start + j], a: start + i, b: start + j });
      j++;
    }
  }
  return out;
}

function hunks(ops: Op[], context: number): string {
  const lines: string[] = [];
  let i = 0;
  while (i < ops.length) {
    while (i < ops.length && ops[i].kind === ' ') i++;
    if (i >= ops.length) break;
    let from = Math.max(0, i - context);
    while (from > 0 && ops[from - 1].kind !== ' ') from--;
    // Extend over changes closer together than twice the context.
    let to = i;
    for (;;) {
      while (to < ops.length && ops[to].kind !== ' ') to++;
      let next = to;
      while (next < ops.length && ops[next].kind === ' ') next++;
      if (next < ops.length && next - to <= context * 2) to = next;
      else break;
    }
    const end = Math.min(ops.length, to + context);
    const part = ops.slice(from, end);
    const countA = part.filter((o) => o.kind !== '+').length;
    const countB = part.filter((o) => o.kind !== '-').length;
    lines.push(`@@ -${part[0].a + 1},${countA} +${part[0].b + 1},${countB} @@`);
    for (const o of part) lines.push(`${o.kind}${o.text}`);
    i = end;
  }
  return `${lines.join('\n')}\n`;
}
