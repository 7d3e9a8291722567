import { batchRecords, type BatchOperation, type GridRecord } from './grid-api';
import type { GridTable } from './grid-table';
import { parseTsv, valueFromText } from './grid-values';

export interface PasteContext {
  key: string;
  object: string;
  table: GridTable;
  records: Map<string, GridRecord>;
  /** The pasted rows went through, as this one change set (what Undo reverts). */
  wrote(changeSetId: string | undefined): void;
}

/** The API's limit of operations per batch. */
const MAX_ROWS = 1000;

/**
 * Rows copied from a spreadsheet, pasted at a cell: its row and those below are updated, rows past the page's
 * last are created (all of them when pasted into the new row), each pasted column going to the grid's columns from the cell's onwards. All of it is one
 * batch request, all or nothing, so a bad value leaves every record as it was (the error names its row).
 * Updates carry no If-Match: the list of records has no versions, and a paste is a deliberate overwrite.
 */
export async function pasteRows(ctx: PasteContext, anchor: HTMLTableCellElement, text: string): Promise<string> {
  const lines = parseTsv(text);
  if (lines.length > MAX_ROWS) throw new Error(`At most ${MAX_ROWS} rows can be pasted at once`);
  const columns = ctx.table.columns;
  const first = anchor.cellIndex;
  const width = Math.max(...lines.map((line) => line.length));
  const targets = columns.slice(first, first + width);
  if (targets.length < width) throw new Error(`The rows have ${width} columns; only ${targets.length} follow this cell`);
  const fixed = targets.find((column) => !column.editable);
  if (fixed) throw new Error(`The column ${fixed.label} cannot be written: paste into field columns`);

  const rows = ctx.table.rows();
  const start = ctx.table.isNew(anchor) ? rows.length : (anchor.parentElement as HTMLTableRowElement).sectionRowIndex;
  const operations: BatchOperation[] = lines.map((line, index) => {
    const values = Object.fromEntries(
      line.map((text, column) => [targets[column].name, valueFromText(targets[column].type ?? 'text', text)]),
    );
    const row = rows[start + index];
    return row && !row.classList.contains('deleted')
      ? { op: 'update', id: row.dataset.id!, record: values }
      : { op: 'create', record: values };
  });
  const { results, changeSetId } = await batchRecords(ctx.key, ctx.object, operations);
  ctx.wrote(changeSetId);

  // Shown as pasted now; the change feed brings what the server made of them (defaults, normalised values).
  let created = 0;
  results.forEach((result, index) => {
    const operation = operations[index];
    const known = ctx.records.get(result.id);
    const record: GridRecord = { ...known, ...operation.record, id: result.id };
    ctx.records.set(result.id, record);
    if (operation.op === 'create') {
      created++;
      ctx.table.appendRow(record);
      return;
    }
    const row = ctx.table.rowOf(result.id);
    for (const field of Object.keys(operation.record)) {
      const cell = row && ctx.table.cell(row, field);
      if (cell) ctx.table.setCell(cell, record[field]);
    }
  });
  const updated = results.length - created;
  return `Pasted ${plural(results.length, 'row')} in one batch: ${updated} updated, ${created} created.`;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}
