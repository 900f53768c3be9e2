/**
 * A detector condition: a comparison of a sample value with a constant, written the way an
 * automation engineer writes it in a PLC (`== 0`, `!= 1`, `< 5`). A bare number means `==`.
 */
export type Operator = '==' | '!=' | '<' | '<=' | '>' | '>=';

export interface Condition {
  op: Operator;
  value: number;
  /** Normalised text, e.g. `== 0`: shown in status and default texts, part of the rule's identity. */
  text: string;
}

const PATTERN = /^\s*(==|!=|<=|>=|<|>|=)?\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*$/;

export function parseCondition(text: string): Condition | null {
  const m = PATTERN.exec(text);
  if (!m) return null;
  const op = (m[1] === undefined || m[1] === '=' ? '==' : m[1]) as Operator;
  const value = Number(m[2]);
  if (!Number.isFinite(value)) return null;
  return { op, value, text: `${op} ${value}` };
}

export function holds(c: Condition, v: number): boolean {
  switch (c.op) {
    case '==':
      return v === c.value;
    case '!=':
      return v !== c.value;
    case '<':
      return v < c.value;
    case '<=':
      return v <= c.value;
    case '>':
      return v > c.value;
    case '>=':
      return v >= c.value;
  }
}
