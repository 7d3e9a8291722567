import { ApiError } from './api';
import { getRecord, patchRecord, type GridRecord, type Versioned } from './grid-api';
import type { GridTable } from './grid-table';
import { cellText, valueFromText } from './grid-values';

/** What editing needs of the grid around it. */
export interface EditContext {
  key(): string | undefined;
  object(): string;
  table: GridTable;
  /** The records on the page, by id: what their cells show. */
  records: Map<string, GridRecord>;
  /** The box where a conflicting edit asks which value wins. */
  conflictBox: HTMLElement;
  status(text: string): void;
  error(error: unknown): void;
  /** A write of the person's went through, as this change set (what Undo reverts). */
  wrote(changeSetId: string | undefined): void;
}

interface Edit {
  cell: HTMLTableCellElement;
  id: string;
  field: string;
  input: HTMLInputElement;
  /** The version the edit applies to: read when the editor opens, so that what was read is what is changed. */
  version: Promise<Versioned>;
  done: boolean;
}

/**
 * Editing a cell in place: the editor opens on the record's current version (GET, its ETag), and the new value
 * goes as a PATCH with If-Match. When someone else changed the record meanwhile, the server answers 412; the
 * person then sees the newer value and chooses: keep theirs (PATCH again, on the newer version) or take the other.
 */
export class GridEditing {
  private edit?: Edit;

  constructor(private readonly ctx: EditContext) {}

  /** The cell whose editor is open, which live changes must not overwrite. */
  get editingCell(): HTMLTableCellElement | undefined {
    return this.edit?.cell;
  }

  start(cell: HTMLTableCellElement, initialText?: string): void {
    const key = this.ctx.key();
    const row = cell.parentElement as HTMLTableRowElement;
    const id = row.dataset.id;
    const column = this.ctx.table.column(cell);
    if (!key || !id || !column.editable || row.classList.contains('deleted') || this.edit) return;
    const record = this.ctx.records.get(id);
    const original = cellText(record?.[column.name]);
    const input = document.createElement('input');
    input.className = 'cell-editor';
    input.value = initialText ?? original;
    input.setAttribute('aria-label', `${column.label} of record ${id}`);
    const version = getRecord(key, this.ctx.object(), id);
    const edit: Edit = { cell, id, field: column.name, input, version, done: false };
    this.edit = edit;
    version.then(
      ({ record: current }) => {
        // The record moved on since the page was read and nothing is typed yet: edit what it is now.
        this.ctx.records.set(id, current);
        if (!edit.done && input.value === original && cellText(current[column.name]) !== original) {
          input.value = cellText(current[column.name]);
        }
      },
      () => undefined, // reported when the edit is committed
    );
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') {
        event.preventDefault();
        void this.commit(edit, true);
      } else if (event.key === 'Escape') {
        event.preventDefault();
        this.cancel(edit, true);
      }
    });
    // Focus went elsewhere (a click on another cell, the search box): saved, and the focus stays where it went.
    input.addEventListener('blur', () => void this.commit(edit, false));
    cell.classList.add('editing');
    cell.replaceChildren(input, ...optionList(input, column.options));
    input.focus();
    if (initialText === undefined) input.select();
  }

  /** Closes the editor without a write; the cell shows the record's value again. */
  private cancel(edit: Edit, refocus: boolean): void {
    if (!this.close(edit)) return;
    this.show(edit.cell, edit.id, edit.field);
    if (refocus) this.ctx.table.activate(edit.cell);
  }

  /** `refocus`: the keyboard ended the edit, so the focus goes back to the cell (it leaves with the editor). */
  private async commit(edit: Edit, refocus: boolean): Promise<void> {
    if (edit.done) return;
    const text = edit.input.value;
    if (text === cellText(this.ctx.records.get(edit.id)?.[edit.field])) {
      this.cancel(edit, refocus);
      return;
    }
    this.close(edit);
    const type = this.ctx.table.column(edit.cell).type ?? 'text';
    const value = valueFromText(type, text);
    this.ctx.table.setCell(edit.cell, value);
    if (refocus) this.ctx.table.activate(edit.cell);
    let version: Versioned;
    try {
      version = await edit.version;
    } catch (error) {
      this.failed(edit, error);
      return;
    }
    await this.save(edit.cell, edit.id, edit.field, value, version.etag);
  }

  /** PATCHes one field at version `etag`; a 412 asks the person which value wins. */
  private async save(cell: HTMLTableCellElement, id: string, field: string, value: unknown, etag: string): Promise<void> {
    const key = this.ctx.key();
    if (!key) return;
    cell.classList.add('saving');
    try {
      const saved = await patchRecord(key, this.ctx.object(), id, { [field]: value }, etag);
      this.ctx.records.set(id, saved.record);
      this.ctx.wrote(saved.changeSetId);
      this.ctx.error(undefined);
      this.ctx.status(`Saved ${field} of ${id}.`);
      this.show(cell, id, field);
    } catch (error) {
      if (error instanceof ApiError && error.status === 412) await this.conflict(cell, id, field, value, etag);
      else this.failed({ cell, id, field }, error);
    } finally {
      cell.classList.remove('saving');
    }
  }

  /** The newer version, and the choice: keep mine (PATCH again on it) or take theirs (show it). */
  private async conflict(cell: HTMLTableCellElement, id: string, field: string, mine: unknown, etag: string): Promise<void> {
    const key = this.ctx.key();
    if (!key) return;
    let theirs: Versioned;
    try {
      theirs = await getRecord(key, this.ctx.object(), id, etag);
    } catch (error) {
      this.failed({ cell, id, field }, error);
      return;
    }
    this.ctx.records.set(id, theirs.record);
    cell.classList.add('conflict');
    const box = this.ctx.conflictBox;
    const label = this.ctx.table.column(cell).label;
    const message = document.createElement('p');
    message.textContent = `Someone else changed this record while you were editing ${label} (record ${id}).`;
    const values = document.createElement('dl');
    for (const [term, value] of [
      ['Their value', theirs.record[field]],
      ['Your value', mine],
    ] as const) {
      const dt = document.createElement('dt');
      dt.textContent = term;
      const dd = document.createElement('dd');
      dd.className = term === 'Their value' ? 'theirs' : 'mine';
      dd.textContent = cellText(value) || '(empty)';
      values.append(dt, dd);
    }
    const keep = button('Keep mine', 'keep-mine');
    const take = button('Take theirs', 'take-theirs');
    const resolve = () => {
      box.hidden = true;
      box.replaceChildren();
      cell.classList.remove('conflict');
    };
    keep.addEventListener('click', () => {
      resolve();
      void this.save(cell, id, field, mine, theirs.etag);
    });
    take.addEventListener('click', () => {
      resolve();
      this.show(cell, id, field);
      this.ctx.status(`Kept the other value of ${field}.`);
      this.ctx.table.activate(cell);
    });
    const actions = document.createElement('div');
    actions.className = 'actions';
    actions.append(keep, take);
    box.replaceChildren(message, values, actions);
    box.hidden = false;
    keep.focus();
  }

  private failed(edit: Pick<Edit, 'cell' | 'id' | 'field'>, error: unknown): void {
    this.ctx.error(error);
    this.show(edit.cell, edit.id, edit.field);
  }

  /** The cell shows the field's value as the page last read or wrote it. */
  private show(cell: HTMLTableCellElement, id: string, field: string): void {
    this.ctx.table.setCell(cell, this.ctx.records.get(id)?.[field]);
  }

  /** Ends an edit once (Enter and then the blur it causes must not both commit); false if it already ended. */
  private close(edit: Edit): boolean {
    if (edit.done) return false;
    edit.done = true;
    if (this.edit === edit) this.edit = undefined;
    edit.cell.classList.remove('editing');
    return true;
  }
}

function button(text: string, className: string): HTMLButtonElement {
  const node = document.createElement('button');
  node.type = 'button';
  node.className = className;
  node.textContent = text;
  return node;
}

/** Numbers the editors' option lists, whose ids must be unique in the page. */
let optionLists = 0;

/** A select field's options as the editor's suggestions (typed text still goes through the server's check). */
function optionList(input: HTMLInputElement, options: string[] | undefined): HTMLDataListElement[] {
  if (!options?.length) return [];
  const list = document.createElement('datalist');
  list.id = `cell-options-${++optionLists}`;
  for (const option of options) list.append(new Option(option, option));
  input.setAttribute('list', list.id);
  return [list];
}
