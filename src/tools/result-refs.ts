import type { ToolResultKind } from './tool.types';

/**
 * Short references to the cells of data results, so that an answer can point at a cell instead of copying its
 * number: the chat's N-th data result is `r<N>`, its rows `r<N>.<row>` (from 1), a cell `r<N>.<row>.<column>`.
 * A result carries its own name (`resultRef`) and every row its `ref`, which is what the model reads and cites.
 */

/** Where the rows of a `rows` result are: the records of a page, the rows of an aggregate, or the one record itself. */
export function resultRows(content: unknown): Array<Record<string, unknown>> {
  if (!isRecord(content)) return [];
  for (const key of ['records', 'rows']) {
    const list = content[key];
    if (Array.isArray(list)) return list.filter(isRecord);
  }
  // A single record (get_record): the result is its one row.
  return [content];
}

/** Whether a result of this kind is a data result that gets a reference (and so counts in a chat's numbering). */
export function isReferenced(kind: ToolResultKind | undefined): kind is 'rows' | 'value' {
  return kind === 'rows' || kind === 'value';
}

/**
 * The result with its references: `resultRef: "r<N>"`, and `ref` on each row (`r<N>.<i>`) of a rows result or on the
 * value result itself (`r<N>`). A new object: the tool's own result is left as it was.
 */
export function withRefs(content: unknown, kind: 'rows' | 'value', n: number): unknown {
  if (!isRecord(content)) return content;
  const resultRef = `r${n}`;
  if (kind === 'value') return { resultRef, ref: resultRef, ...withoutRefKeys(content) };
  const rows = resultRows(content);
  if (rows.length === 1 && rows[0] === content) return { resultRef, ref: `${resultRef}.1`, ...withoutRefKeys(content) };
  const key = Array.isArray(content.records) ? 'records' : 'rows';
  let i = 0;
  const list = (content[key] as unknown[]).map((row) =>
    isRecord(row) ? { ref: `${resultRef}.${++i}`, ...withoutRefKeys(row) } : row,
  );
  return { resultRef, ...content, [key]: list };
}

/** A row without the keys references use: they are the server's (no field may be named `ref`; an alias gives way). */
export function withoutRefKeys(row: Record<string, unknown>): Record<string, unknown> {
  if (!('ref' in row) && !('resultRef' in row)) return row;
  const rest = { ...row };
  delete rest.ref;
  delete rest.resultRef;
  return rest;
}

/** `r12` → 12. */
export function refNumber(resultRef: unknown): number | undefined {
  if (typeof resultRef !== 'string') return undefined;
  const match = /^r([1-9]\d{0,5})$/.exec(resultRef);
  return match ? Number(match[1]) : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
