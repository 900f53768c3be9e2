/**
 * CSV as spreadsheets write it (RFC 4180, and what Excel adds): fields in double quotes may hold
 * the delimiter, line breaks and quotes (doubled: `""`); records end with CRLF, LF or CR; a UTF-8
 * byte order mark at the start is dropped. The delimiter is read from the header line: a comma,
 * or the semicolon (or tab) that Excel writes in locales where the comma is the decimal mark.
 * Small on purpose (the mapping import and export are its only users), so no dependency.
 */

export class CsvError extends Error {
  constructor(
    message: string,
    /** Row number as a spreadsheet shows it (the header is row 1). */
    readonly row: number,
  ) {
    super(message);
  }
}

export interface CsvRecord {
  /** Row number as a spreadsheet shows it: the header is row 1; blank lines count. */
  row: number;
  fields: string[];
}

export interface ParsedCsv {
  delimiter: ',' | ';' | '\t';
  /** Every record, the header first, blank lines left out. */
  records: CsvRecord[];
}

export interface CsvLimits {
  /** Most records, the header included. */
  maxRecords: number;
  /** Most fields in a record. */
  maxFields: number;
  /** Longest field, in characters. */
  maxFieldChars: number;
}

/** The delimiter of the first line: the one of `,` `;` tab that occurs most outside quotes (a comma when none). */
function detectDelimiter(text: string): ParsedCsv['delimiter'] {
  const counts = { ',': 0, ';': 0, '\t': 0 };
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') quoted = !quoted;
    else if (!quoted && (c === '\n' || c === '\r')) break;
    else if (!quoted && c in counts) counts[c as keyof typeof counts] += 1;
  }
  return counts[';'] > counts[','] && counts[';'] >= counts['\t'] ? ';' : counts['\t'] > counts[','] ? '\t' : ',';
}

export function parseCsv(input: string, limits: CsvLimits): ParsedCsv {
  const text = input.charCodeAt(0) === 0xfeff ? input.slice(1) : input;
  const delimiter = detectDelimiter(text);
  const records: CsvRecord[] = [];
  let row = 1;
  let fields: string[] = [];
  let field = '';
  let i = 0;
  // A record that is one empty field (a blank line) is not kept, but counts as a row.
  const endRecord = () => {
    fields.push(field);
    field = '';
    if (!(fields.length === 1 && fields[0] === '')) {
      if (records.length >= limits.maxRecords) throw new CsvError(`more than ${limits.maxRecords} rows; split the file`, row);
      records.push({ row, fields });
    }
    fields = [];
  };
  const endField = () => {
    fields.push(field);
    field = '';
    if (fields.length >= limits.maxFields) throw new CsvError(`more than ${limits.maxFields} columns`, row);
  };
  const grow = (s: string) => {
    field += s;
    if (field.length > limits.maxFieldChars) throw new CsvError(`a field is longer than ${limits.maxFieldChars} characters`, row);
  };
  while (i < text.length) {
    const c = text[i];
    if (c === '"' && field === '') {
      // A quoted field: up to the quote that is not doubled.
      const startRow = row;
      i += 1;
      for (;;) {
        const q = text.indexOf('"', i);
        if (q < 0) throw new CsvError('a quoted field is not closed (a " is missing)', startRow);
        grow(text.slice(i, q));
        if (text[q + 1] === '"') {
          grow('"');
          i = q + 2;
          continue;
        }
        i = q + 1;
        break;
      }
      // Text after the closing quote up to the delimiter is kept (as spreadsheets do).
      continue;
    }
    if (c === delimiter) {
      endField();
      i += 1;
    } else if (c === '\r' || c === '\n') {
      endRecord();
      row += 1;
      i += c === '\r' && text[i + 1] === '\n' ? 2 : 1;
    } else {
      // Plain text up to the delimiter or the line end; a quote inside it is a quote.
      let j = i + 1;
      while (j < text.length && text[j] !== delimiter && text[j] !== '\r' && text[j] !== '\n' && text[j] !== '"') j += 1;
      grow(text.slice(i, j));
      i = j;
    }
  }
  if (field !== '' || fields.length > 0) endRecord();
  return { delimiter, records };
}

/** A field quoted when it must be: it holds the delimiter, a quote, a line break or blanks at either end. */
function formatField(value: string): string {
  return /[",;\r\n\t]|^\s|\s$/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

/** Records as CSV: comma-separated, CRLF after every record (RFC 4180 §2). */
export function formatCsv(records: ReadonlyArray<readonly string[]>): string {
  return records.map((r) => `${r.map(formatField).join(',')}\r\n`).join('');
}
