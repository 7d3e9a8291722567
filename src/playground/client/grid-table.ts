import type { FieldSummary, GridRecord, OrderBy } from './grid-api';
import { computedText, isComputedField } from './grid-computed';
import { cellText } from './grid-values';

/** Longest value shown in a cell; the full value is in the cell's title. */
const MAX_CELL_CHARS = 120;
/** How long a cell another key changed stays highlighted. */
const FLASH_MS = 2000;
/** Columns the server sets: shown, never edited. */
const READ_ONLY = new Set(['id', 'created_at', 'updated_at']);

export interface Column {
  name: string;
  label: string;
  /** The field's type (a computed field's: the type of its value); undefined for the record's own columns (id). */
  type?: string;
  editable: boolean;
  /** A computed field (formula, rollup, count, lookup_value): how its value is computed, in words. Never written. */
  computed?: string;
  /** What a select field's editor offers. */
  options?: string[];
}

/** The grid's columns: `id`, then the fields the key may see (those of the view, in its order, when it names some). */
export function gridColumns(fields: FieldSummary[], viewFields: string[] | undefined): Column[] {
  const byName = new Map(fields.map((field) => [field.name, field]));
  const names = viewFields ? viewFields.filter((name) => name !== 'id') : fields.map((field) => field.name);
  return [
    { name: 'id', label: 'id', editable: false },
    ...names.map((name) => {
      const field = byName.get(name);
      const options = field?.type === 'select' && field.options?.length ? { options: field.options } : {};
      if (field && isComputedField(field)) {
        const computed = computedText(field, fields) ?? field.type;
        return { name, label: field.label || name, type: field.resultType, editable: false, computed };
      }
      return { name, label: field?.label || name, type: field?.type, editable: !!field && !READ_ONLY.has(name), ...options };
    }),
  ];
}

/**
 * The table's DOM: a header whose buttons sort, one row per record (`data-id`), one cell per column
 * (`data-field`), and below them (in the footer) an empty row to paste new records into. Cells are focusable
 * one at a time (the active cell), for the keyboard and for paste.
 */
export class GridTable {
  columns: Column[] = [];
  private readonly flashes = new WeakMap<HTMLElement, ReturnType<typeof setTimeout>>();

  constructor(
    readonly table: HTMLTableElement,
    private readonly onSort: (field: string) => void,
  ) {}

  get body(): HTMLTableSectionElement {
    return this.table.tBodies[0];
  }

  get foot(): HTMLTableSectionElement {
    return this.table.tFoot ?? this.table.createTFoot();
  }

  clear(): void {
    this.table.tHead?.replaceChildren();
    this.body.replaceChildren();
    this.foot.replaceChildren();
  }

  /** A cell of the records or of the new row, not of the header; undefined for anything else. */
  cellOf(target: EventTarget | null): HTMLTableCellElement | undefined {
    if (!(target instanceof HTMLTableCellElement)) return undefined;
    const section = target.parentElement?.parentElement;
    return section === this.body || section === this.foot ? target : undefined;
  }

  /** Whether a cell is in the row for new records. */
  isNew(cell: HTMLTableCellElement): boolean {
    return cell.parentElement?.parentElement === this.foot;
  }

  renderHead(columns: Column[], orderBy: OrderBy[] | undefined): void {
    this.columns = columns;
    const sorted = orderBy?.[0];
    const row = document.createElement('tr');
    for (const column of columns) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.title = column.name;
      const order = sorted?.field === column.name ? sorted.order : undefined;
      th.setAttribute('aria-sort', order === 'asc' ? 'ascending' : order === 'desc' ? 'descending' : 'none');
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'sort';
      button.textContent = column.label;
      const arrow = document.createElement('span');
      arrow.className = 'sort-arrow';
      arrow.setAttribute('aria-hidden', 'true');
      arrow.textContent = order === 'asc' ? ' ▲' : order === 'desc' ? ' ▼' : '';
      button.append(arrow);
      button.addEventListener('click', () => this.onSort(column.name));
      th.append(button);
      if (column.computed) {
        th.classList.add('computed');
        button.title = `${column.computed} (read-only)`;
        const mark = document.createElement('span');
        mark.className = 'computed-mark';
        mark.setAttribute('aria-hidden', 'true');
        mark.textContent = 'ƒ ';
        button.setAttribute('aria-description', 'computed, read-only');
        button.prepend(mark);
      }
      row.append(th);
    }
    this.table.tHead!.replaceChildren(row);
  }

  renderRows(records: GridRecord[]): void {
    this.body.replaceChildren(...records.map((record) => this.row(record)));
    const blank = document.createElement('tr');
    blank.className = 'new-row';
    for (const column of this.columns) {
      const td = document.createElement('td');
      td.dataset.field = column.name;
      td.tabIndex = -1;
      if (column.computed) td.classList.add('computed');
      blank.append(td);
    }
    blank.cells[0].textContent = 'New';
    blank.cells[0].title = 'Paste rows here to add them as new records';
    this.foot.replaceChildren(blank);
    this.table.querySelector('tbody td, tfoot td')?.setAttribute('tabindex', '0');
  }

  appendRow(record: GridRecord): void {
    this.body.append(this.row(record));
  }

  rows(): HTMLTableRowElement[] {
    return [...this.body.rows];
  }

  rowOf(id: string): HTMLTableRowElement | undefined {
    return this.rows().find((row) => row.dataset.id === id);
  }

  cell(row: HTMLTableRowElement, field: string): HTMLTableCellElement | undefined {
    const index = this.columns.findIndex((column) => column.name === field);
    return index < 0 ? undefined : row.cells[index];
  }

  column(cell: HTMLTableCellElement): Column {
    return this.columns[cell.cellIndex];
  }

  /** Shows a value in a cell (long values cut, whole in the title; a computed value's title says how it is computed). */
  setCell(cell: HTMLTableCellElement, value: unknown): void {
    const text = cellText(value);
    const long = text.length > MAX_CELL_CHARS;
    cell.textContent = long ? `${text.slice(0, MAX_CELL_CHARS)}…` : text;
    const computed =
      this.columns[cell.cellIndex]?.name === cell.dataset.field ? this.columns[cell.cellIndex].computed : undefined;
    const title = [long ? text : '', computed ? `Computed, read-only: ${computed}` : ''].filter(Boolean).join('\n');
    if (title) cell.title = title;
    else cell.removeAttribute('title');
  }

  /** Highlights a cell briefly (restarting the highlight of one already lit). */
  flash(cell: HTMLTableCellElement): void {
    clearTimeout(this.flashes.get(cell));
    cell.classList.remove('flash');
    void cell.offsetWidth; // a reflow, so that the animation starts again
    cell.classList.add('flash');
    this.flashes.set(
      cell,
      setTimeout(() => cell.classList.remove('flash'), FLASH_MS),
    );
  }

  /** Makes a cell the one that Tab reaches and that keys and paste act on. */
  activate(cell: HTMLTableCellElement): void {
    for (const other of this.table.querySelectorAll('td[tabindex="0"]')) other.setAttribute('tabindex', '-1');
    cell.tabIndex = 0;
    cell.focus();
  }

  /** The cell `rows` down and `columns` across from this one, if there is one. */
  neighbour(cell: HTMLTableCellElement, rows: number, columns: number): HTMLTableCellElement | undefined {
    const all = [...this.body.rows, ...this.foot.rows];
    const row = all[all.indexOf(cell.parentElement as HTMLTableRowElement) + rows];
    return row?.cells[cell.cellIndex + columns];
  }

  private row(record: GridRecord): HTMLTableRowElement {
    const tr = document.createElement('tr');
    tr.dataset.id = record.id;
    for (const column of this.columns) {
      const td = document.createElement('td');
      td.dataset.field = column.name;
      td.tabIndex = -1;
      if (column.editable) td.classList.add('editable');
      if (column.computed) td.classList.add('computed');
      if (column.type) td.dataset.type = column.type;
      tr.append(td);
      this.setCell(td, record[column.name]);
    }
    return tr;
  }
}
