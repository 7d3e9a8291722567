/** Field values as a grid shows them, and values from what a person types or pastes. */

const NUMERIC = new Set(['number', 'currency', 'percent', 'integer']);
const STRUCTURED = new Set(['json', 'multiselect']);

/** The text of a value in a cell (and in its editor). */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  // Numbers, booleans, and the JSON of json, multiselect and other structured values.
  return JSON.stringify(value) ?? '';
}

/**
 * The value to send for text typed into a cell of a field of this type. Text that does not read as the type goes as
 * typed, so that the server's `invalid_value` names the problem rather than the page guessing.
 */
export function valueFromText(type: string, text: string): unknown {
  const trimmed = text.trim();
  if (trimmed === '') return null;
  if (NUMERIC.has(type)) {
    const number = Number(trimmed);
    return Number.isFinite(number) ? number : text;
  }
  if (type === 'boolean') {
    if (/^(true|yes|1)$/i.test(trimmed)) return true;
    if (/^(false|no|0)$/i.test(trimmed)) return false;
    return text;
  }
  if (STRUCTURED.has(type)) {
    try {
      return JSON.parse(trimmed) as unknown;
    } catch {
      // A spreadsheet's "a, b" for a multiselect.
      return type === 'multiselect' ? trimmed.split(',').map((option) => option.trim()) : text;
    }
  }
  return text;
}

/**
 * Rows of tab-separated text as spreadsheets put it on the clipboard: a cell holding a tab, a line break or a
 * quote is in double quotes, its quotes doubled; lines end with \n or \r\n; a last line break ends the last row.
 */
export function parseTsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let at = 0;
  const endCell = () => {
    row.push(cell);
    cell = '';
  };
  while (at < text.length) {
    const char = text[at];
    if (char === '"' && cell === '') {
      // A quoted cell: up to the quote not followed by another.
      at++;
      while (at < text.length) {
        if (text[at] === '"') {
          if (text[at + 1] === '"') {
            cell += '"';
            at += 2;
            continue;
          }
          at++;
          break;
        }
        cell += text[at++];
      }
      continue;
    }
    if (char === '\t') {
      endCell();
    } else if (char === '\n' || char === '\r') {
      if (char === '\r' && text[at + 1] === '\n') at++;
      endCell();
      rows.push(row);
      row = [];
    } else {
      cell += char;
    }
    at++;
  }
  if (cell !== '' || row.length) {
    endCell();
    rows.push(row);
  }
  return rows;
}
