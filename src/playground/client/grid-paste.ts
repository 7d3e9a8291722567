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
 * last are created (all of them when pasted into the new row), each pasted column going to the grid's columns from the
 * cell's onwards (those over a computed column skipped: its values are the server's). All of it is one
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
  const fixed = targets.find((column) => !column.editable && !column.computed);
  if (fixed) throw new Error(`The column ${fixed.label} cannot be written: paste into field columns`);
  // Computed columns are the server's to fill: what is pasted over them is skipped, not sent to be refused.
  const written = targets.flatMap((column, index) => (column.computed ? [] : [index]));
  const skipped = targets.filter((column) => column.computed).map((column) => column.label);
  if (!written.length)
    throw new Error(`Nothing pasted: ${skipped.join(', ')} ${skipped.length === 1 ? 'is' : 'are'} computed, read-only`);

  const rows = ctx.table.rows();
  const start = ctx.table.isNew(anchor) ? rows.length : (anchor.parentElement as HTMLTableRowElement).sectionRowIndex;
  const operations = lines
    .map((line, index): BatchOperation => {
      const values = Object.fromEntries(
        written
          .filter((column) => column < line.length)
          .map((column) => [targets[column].name, valueFromText(targets[column].type ?? 'text', line[column])]),
      );
      const row = rows[start + index];
      return row && !row.classList.contains('deleted')
        ? { op: 'update', id: row.dataset.id!, record: values }
        : { op: 'create', record: values };
    })
    .filter((operation) => Object.keys(operation.record).length > 0); // a line only over computed columns: nothing to write
  if (!operations.length) throw new Error('Nothing pasted: every pasted value was over a computed column');
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
  const summary = `Pasted ${plural(results.length, 'row')} in one batch: ${updated} updated, ${created} created.`;
  if (!skipped.length) return summary;
  return `${summary} Skipped the computed column${skipped.length === 1 ? '' : 's'} ${skipped.join(', ')}.`;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}
