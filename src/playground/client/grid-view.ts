import { ApiError } from './api';
import { showError } from './dom';
import {
  deleteRecord,
  describeObject,
  listRecords,
  listViews,
  type Change,
  type FieldSummary,
  type GridQuery,
  type GridRecord,
  type OrderBy,
  type RecordPage,
  type ViewSummary,
} from './grid-api';
import { followedObjects, isComputedField } from './grid-computed';
import { GridEditing } from './grid-edit';
import { ChangeFeed, type FeedState } from './grid-feed';
import { pasteRows } from './grid-paste';
import { RelatedFeeds } from './grid-related';
import { conflictList, conflictsOf, HistoryPanel, TrashPanel, type HistoryElements, type TrashElements } from './grid-history';
import { gridColumns, GridTable } from './grid-table';
import { ownChangeSets, revertChangeSet } from './history-api';

const PAGE_SIZE = 25;
/** How long the first page waits for the change feed to open. */
const FEED_WAIT_MS = 3000;

export interface GridElements {
  form: HTMLFormElement;
  object: HTMLSelectElement;
  view: HTMLSelectElement;
  search: HTMLInputElement;
  where: HTMLTextAreaElement;
  error: HTMLElement;
  conflict: HTMLElement;
  status: HTMLElement;
  table: HTMLTableElement;
  caption: HTMLElement;
  prev: HTMLButtonElement;
  next: HTMLButtonElement;
  pageInfo: HTMLElement;
  feed: HTMLElement;
  /** The records panel: Ctrl+Z anywhere in it (but in a text box) is Undo. */
  panel: HTMLElement;
  historyButton: HTMLButtonElement;
  deleteButton: HTMLButtonElement;
  undoButton: HTMLButtonElement;
  trashButton: HTMLButtonElement;
  selected: HTMLElement;
  undoConflict: HTMLElement;
  history: HistoryElements;
  trash: TrashElements;
}

/** How many of the key's latest change sets Undo looks through when it has none of this page's to revert. */
const UNDO_LOOKBACK = 20;

const FEED_TEXT: Record<FeedState, string> = {
  connecting: 'Connecting to live changes…',
  live: 'Live',
  reconnecting: 'Reconnecting to live changes…',
  off: '',
};

/**
 * The grid, a client of the records API: pick an object and one of its saved views, search or filter, sort by a
 * header, page with keyset cursors, edit cells in place (If-Match), paste rows from a spreadsheet (one batch), and
 * see the changes other keys make arrive from the change feed. Its columns are what the key may see.
 */
export class GridView {
  private fields: FieldSummary[] = [];
  private views: ViewSummary[] = [];
  /** The header the person clicked; undefined: the view's order (or the server's, by id). */
  private sort?: OrderBy;
  private query?: GridQuery;
  /** Where each page so far starts: undefined for the first, then each previous page's nextCursor. */
  private cursors: Array<string | undefined> = [];
  private nextCursor: string | null = null;
  private total?: { count: number; exact: boolean };
  private loading?: AbortController;
  private feed?: ChangeFeed;
  /** The feeds of the other objects the computed fields read, and the rows they bring up to date. */
  private related?: RelatedFeeds;
  /** Bumped by every open, so that a slower earlier one gives way. */
  private openings = 0;
  private readonly table: GridTable;
  private readonly records = new Map<string, GridRecord>();
  private readonly editing: GridEditing;
  private readonly history: HistoryPanel;
  private readonly trash: TrashPanel;
  /** The change sets of the person's own writes in this grid (edits, pastes, deletes, restores), oldest first. */
  private undoStack: string[] = [];
  private undoing = false;
  /** The record of the row the person last selected (a cell of it focused). */
  private selectedId?: string;

  constructor(
    private readonly el: GridElements,
    private readonly key: () => string | undefined,
  ) {
    this.table = new GridTable(el.table, (field) => this.toggleSort(field));
    this.editing = new GridEditing({
      key,
      object: () => this.el.object.value,
      table: this.table,
      records: this.records,
      conflictBox: el.conflict,
      status: (text) => (this.el.status.textContent = text),
      error: (error) => this.showError(error),
      wrote: (changeSetId) => this.wrote(changeSetId),
    });
    const panelContext = { key, object: () => this.el.object.value };
    this.history = new HistoryPanel(el.history, {
      ...panelContext,
      restored: (id, version, written) => {
        this.wrote(written.changeSetId);
        this.showRecord(written.record);
        this.el.status.textContent = `Restored record ${id} to version ${version}.`;
      },
    });
    this.trash = new TrashPanel(el.trash, {
      ...panelContext,
      // A restore from the trash is a change set too: Undo sends the record back to the trash.
      restored: (id, written) => {
        this.wrote(written.changeSetId);
        this.el.status.textContent = `Restored record ${id} from the trash.`;
        void this.page();
      },
    });
    el.historyButton.addEventListener('click', () => {
      if (this.selectedId) void this.history.open(this.selectedId);
    });
    el.deleteButton.addEventListener('click', () => void this.deleteSelected());
    el.undoButton.addEventListener('click', () => void this.undo());
    el.trashButton.addEventListener('click', () => void (this.trash.isOpen ? this.trash.close() : this.trash.open()));
    el.panel.addEventListener('keydown', (event) => {
      if (!(event.ctrlKey || event.metaKey) || event.shiftKey || event.altKey || event.key.toLowerCase() !== 'z') return;
      // In a text box (a cell's editor, the search, the filter) Ctrl+Z undoes typing, as everywhere.
      const target = event.target as HTMLElement | null;
      if (target?.closest('input, textarea, select, [contenteditable]')) return;
      event.preventDefault();
      void this.undo();
    });
    el.form.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.load();
    });
    el.object.addEventListener('change', () => void this.open());
    el.view.addEventListener('change', () => {
      this.sort = undefined;
      void this.load();
    });
    el.prev.addEventListener('click', () => {
      this.cursors.pop();
      void this.page();
    });
    el.next.addEventListener('click', () => {
      if (this.nextCursor === null) return;
      this.cursors.push(this.nextCursor);
      void this.page();
    });
    this.listenToCells();
  }

  /** Fills the object list (after a key was entered) and shows the first object's records. */
  async start(objects: Array<{ name: string; label: string }>): Promise<void> {
    this.el.object.replaceChildren(
      ...objects.map((object) => new Option(object.label ? `${object.label} (${object.name})` : object.name, object.name)),
    );
    this.el.object.disabled = objects.length === 0;
    if (objects.length === 0) {
      this.el.caption.textContent = 'No objects defined yet';
      return;
    }
    await this.open();
  }

  reset(): void {
    this.openings++;
    this.loading?.abort();
    this.feed?.stop();
    this.feed = undefined;
    this.related?.stop();
    this.related = undefined;
    this.el.object.replaceChildren();
    this.el.object.disabled = true;
    this.el.view.replaceChildren();
    this.el.view.disabled = true;
    this.table.clear();
    this.records.clear();
    this.el.caption.textContent = 'No object selected';
    this.el.pageInfo.textContent = '';
    this.el.status.textContent = '';
    this.el.prev.disabled = true;
    this.el.next.disabled = true;
    this.el.conflict.hidden = true;
    this.showError(undefined);
    this.forgetObject();
    this.el.undoButton.disabled = true;
    this.el.trashButton.disabled = true;
  }

  /** Reads the page shown again (after an undo elsewhere, in the chat, for one). */
  refresh(): void {
    void this.page();
  }

  /** What belonged to the object shown: its undo list, the selection, the open history and trash. */
  private forgetObject(): void {
    this.undoStack = [];
    this.select(undefined);
    this.history.close();
    this.trash.close();
    this.el.undoConflict.hidden = true;
    this.el.undoConflict.replaceChildren();
  }

  /** An object chosen: its fields and views as this key sees them, its changes followed, its first page. */
  private async open(): Promise<void> {
    const key = this.key();
    const name = this.el.object.value;
    if (!key || !name) return;
    const opening = ++this.openings;
    this.feed?.stop();
    this.feed = undefined;
    this.related?.stop();
    this.related = undefined;
    this.sort = undefined;
    this.forgetObject();
    this.el.undoButton.disabled = false;
    this.el.trashButton.disabled = false;
    let fields: FieldSummary[];
    let views: ViewSummary[];
    try {
      [{ fields }, views] = await Promise.all([describeObject(key, name), listViews(key, name)]);
    } catch (error) {
      if (opening === this.openings) this.showError(error);
      return;
    }
    // Another object (or key) was chosen meanwhile: that opening wins.
    if (opening !== this.openings) return;
    [this.fields, this.views] = [fields, views];
    this.el.view.replaceChildren(
      new Option('All records', ''),
      ...this.views.map((view) => new Option(view.shared ? `${view.label} (shared)` : view.label, view.name)),
    );
    this.el.view.disabled = this.views.length === 0;
    // The objects the computed fields read (and those their inputs are computed from, when they are).
    const computed = fields.filter(isComputedField).map((field) => field.name);
    const described = new Map([[name, Promise.resolve(fields)]]);
    const describe = (object: string) => {
      let fieldsOf = described.get(object);
      if (!fieldsOf) {
        fieldsOf = describeObject(key, object).then((description) => description.fields);
        described.set(object, fieldsOf);
      }
      return fieldsOf;
    };
    const dependencies = await followedObjects(fields, computed, describe);
    if (opening !== this.openings) return;
    const feed = new ChangeFeed(() => this.key() ?? key, name, {
      change: (change) => this.applyChange(change),
      state: (state) => {
        this.el.feed.dataset.state = state;
        this.el.feed.textContent = FEED_TEXT[state];
      },
    });
    this.feed = feed;
    // Computed values read from other objects (rollups, counts, lookup values) change with their records too.
    if (dependencies.size) {
      this.related = new RelatedFeeds(
        {
          key: this.key,
          object: name,
          rows: () => this.records,
          fields: () => this.table.columns.filter((column) => column.computed).map((column) => column.name),
          refreshed: (records) => this.showComputed(records),
        },
        dependencies,
        key,
      );
    }
    // The streams follow changes from when they open: read the page after that, so that no write falls in between.
    // A stream that cannot open (yet) does not keep the records from showing.
    const ready = Promise.all([feed.ready, this.related?.ready]);
    await Promise.race([ready, new Promise((resolve) => setTimeout(resolve, FEED_WAIT_MS))]);
    if (opening !== this.openings) return;
    await this.load();
  }

  private toggleSort(field: string): void {
    const current = this.sort ?? this.selectedView()?.orderBy?.[0];
    this.sort = { field, order: current?.field === field && current.order === 'asc' ? 'desc' : 'asc' };
    void this.load();
  }

  private selectedView(): ViewSummary | undefined {
    return this.views.find((view) => view.name === this.el.view.value);
  }

  /** The first page of what the form asks for. */
  private async load(): Promise<void> {
    const view = this.selectedView();
    this.query = {
      view: view?.name,
      q: this.el.search.value.trim() || undefined,
      where: this.el.where.value.trim() || undefined,
      orderBy: this.sort ? [this.sort] : undefined,
      limit: PAGE_SIZE,
    };
    this.cursors = [undefined];
    await this.page();
  }

  /** The page that starts at the last of `cursors`, of the query the first page was read with. */
  private async page(): Promise<void> {
    const key = this.key();
    const name = this.el.object.value;
    const query = this.query;
    if (!key || !name || !query) return;
    this.loading?.abort();
    const loading = new AbortController();
    this.loading = loading;
    this.el.table.setAttribute('aria-busy', 'true');
    try {
      const page = await listRecords(key, name, query, this.cursors.at(-1), loading.signal);
      this.showError(undefined);
      this.render(name, page);
    } catch (error) {
      if (loading.signal.aborted) return;
      this.showError(error);
    } finally {
      if (this.loading === loading) this.el.table.removeAttribute('aria-busy');
    }
  }

  private render(name: string, page: RecordPage): void {
    const view = this.selectedView();
    this.table.renderHead(gridColumns(this.fields, view?.fields), this.sort ? [this.sort] : view?.orderBy);
    this.records.clear();
    for (const record of page.records) this.records.set(record.id, record);
    this.table.renderRows(page.records);
    this.nextCursor = page.nextCursor;
    // Pages after a cursor carry no total: the first page's stands for the query.
    if (page.total !== undefined) this.total = { count: page.total, exact: page.totalExact !== false };
    const offset = (this.cursors.length - 1) * PAGE_SIZE;
    const total = this.total?.exact ? String(this.total.count) : `about ${this.total?.count ?? '?'}`;
    this.el.caption.textContent = view ? `Records of ${name}, view ${view.label}` : `Records of ${name}`;
    this.el.pageInfo.textContent = page.records.length
      ? `${offset + 1}–${offset + page.records.length} of ${total}`
      : 'No records match';
    this.el.prev.disabled = this.cursors.length <= 1;
    this.el.next.disabled = page.nextCursor === null;
    if (this.selectedId && !this.records.has(this.selectedId)) this.select(undefined);
  }

  /** A write of the person's went through: its change set is the one Undo reverts next. */
  private wrote(changeSetId: string | undefined): void {
    if (!changeSetId) return;
    this.undoStack.push(changeSetId);
    this.el.undoConflict.hidden = true;
    this.el.undoConflict.replaceChildren();
  }

  /** The record's row (when on the page) shows it as written. */
  private showRecord(record: GridRecord): void {
    this.records.set(record.id, record);
    const row = this.table.rowOf(record.id);
    if (!row) return;
    row.classList.remove('deleted');
    for (const column of this.table.columns) {
      const cell = this.table.cell(row, column.name);
      if (cell && cell !== this.editing.editingCell) this.table.setCell(cell, record[column.name]);
    }
  }

  /** The row whose cell has the focus: what History and Delete act on. */
  private select(id: string | undefined): void {
    this.selectedId = id;
    const { historyButton, deleteButton, selected } = this.el;
    historyButton.disabled = deleteButton.disabled = !id;
    if (id) {
      historyButton.setAttribute('aria-label', `History of record ${id}`);
      deleteButton.setAttribute('aria-label', `Delete record ${id}`);
      selected.textContent = `Selected: record ${id}`;
    } else {
      historyButton.removeAttribute('aria-label');
      deleteButton.removeAttribute('aria-label');
      selected.textContent = '';
    }
  }

  private async deleteSelected(): Promise<void> {
    const key = this.key();
    const id = this.selectedId;
    const object = this.el.object.value;
    if (!key || !id || !object) return;
    this.el.deleteButton.disabled = true;
    try {
      const changeSetId = await deleteRecord(key, object, id);
      this.wrote(changeSetId);
      this.records.delete(id);
      this.table.rowOf(id)?.classList.add('deleted');
      this.select(undefined);
      if (this.history.recordId === id) this.history.close();
      this.showError(undefined);
      this.el.status.textContent = `Deleted record ${id}: it is in the trash, and Undo brings it back.`;
      if (this.trash.isOpen) await this.trash.open();
    } catch (error) {
      this.el.deleteButton.disabled = false;
      this.showError(error);
    }
  }

  /**
   * Reverts the person's last change set of this object as one, all or nothing: the last write made in this grid, or
   * else the key's latest change set of the object not yet reverted. A record changed since makes the server refuse
   * (409 revert_conflict): nothing is written and the conflicts are shown.
   */
  private async undo(): Promise<void> {
    const key = this.key();
    const object = this.el.object.value;
    if (!key || !object || this.undoing) return;
    this.undoing = true;
    this.el.undoButton.disabled = true;
    this.el.undoButton.setAttribute('aria-busy', 'true');
    const box = this.el.undoConflict;
    try {
      let id = this.undoStack.at(-1);
      if (!id) {
        const sets = await ownChangeSets(key, object, UNDO_LOOKBACK);
        id = sets.find((set) => !set.revertedBy && !set.reverts)?.id;
      }
      if (!id) {
        this.el.status.textContent = 'Nothing to undo.';
        return;
      }
      await revertChangeSet(key, id);
      this.undoStack = this.undoStack.filter((other) => other !== id);
      box.hidden = true;
      box.replaceChildren();
      this.showError(undefined);
      this.el.status.textContent = 'Undid your last change.';
      if (this.history.recordId) await this.history.open(this.history.recordId);
      if (this.trash.isOpen) await this.trash.open();
      await this.page();
    } catch (error) {
      const conflicts = conflictsOf(error);
      if (conflicts) {
        const message = document.createElement('p');
        message.textContent = `Nothing was undone: ${
          error instanceof ApiError ? error.message : 'records changed since'
        }. What changed since your change:`;
        const dismiss = document.createElement('button');
        dismiss.type = 'button';
        dismiss.className = 'dismiss';
        dismiss.textContent = 'Dismiss';
        dismiss.addEventListener('click', () => {
          box.hidden = true;
          box.replaceChildren();
        });
        box.replaceChildren(message, conflictList(conflicts), dismiss);
        box.hidden = false;
        this.el.status.textContent = '';
      } else {
        this.showError(error);
      }
    } finally {
      this.undoing = false;
      this.el.undoButton.disabled = !this.el.object.value;
      this.el.undoButton.removeAttribute('aria-busy');
    }
  }

  /**
   * A change from the feed: the cells it changed on this page show the new values and, when another key (or the
   * server) wrote, light up briefly. Records outside the page are left to the next read.
   */
  private applyChange(change: Change): void {
    const row = this.table.rowOf(change.id);
    if (!row) return;
    if (change.op === 'delete') {
      row.classList.add('deleted');
      this.records.delete(change.id);
      if (this.selectedId === change.id) this.select(undefined);
      return;
    }
    if (!change.record) return;
    const before = this.records.get(change.id);
    this.records.set(change.id, change.record);
    for (const field of change.changedFields) {
      const cell = this.table.cell(row, field);
      if (!cell || cell === this.editing.editingCell || cell.matches('.saving, .conflict')) continue;
      this.table.setCell(cell, change.record[field]);
      if (change.actor !== 'self') this.table.flash(cell);
    }
    // Computed values are not written, so no change names them: they come with the record, as computed now.
    for (const column of this.table.columns) {
      if (!column.computed || change.changedFields.includes(column.name) || !(column.name in change.record)) continue;
      this.showComputedCell(row, column.name, before?.[column.name], change.record[column.name]);
    }
  }

  /** Fresh computed values of rows on the page (read again after records they are computed from changed). */
  private showComputed(records: GridRecord[]): void {
    for (const fresh of records) {
      const row = this.table.rowOf(fresh.id);
      const known = this.records.get(fresh.id);
      if (!row || !known || row.classList.contains('deleted')) continue;
      this.records.set(fresh.id, { ...known, ...fresh });
      for (const column of this.table.columns) {
        if (column.computed && column.name in fresh)
          this.showComputedCell(row, column.name, known[column.name], fresh[column.name]);
      }
    }
  }

  /** A computed cell shows its value as computed now, lit up when it changed. */
  private showComputedCell(row: HTMLTableRowElement, field: string, before: unknown, after: unknown): void {
    const cell = this.table.cell(row, field);
    if (!cell) return;
    this.table.setCell(cell, after);
    if (JSON.stringify(before) !== JSON.stringify(after)) this.table.flash(cell);
  }

  /** A computed cell asked to be edited: it says why it cannot be. */
  private refuseEdit(cell: HTMLTableCellElement): boolean {
    const column = this.table.column(cell);
    if (!column?.computed || this.table.isNew(cell)) return false;
    this.el.status.textContent = `${column.label} is computed (${column.computed}): it cannot be edited.`;
    return true;
  }

  private listenToCells(): void {
    // On the table: the records' cells and those of the new row below them.
    const body = this.el.table;
    const cellOf = (target: EventTarget | null) => this.table.cellOf(target);
    body.addEventListener('focusin', (event) => {
      const cell = cellOf(event.target) ?? cellOf((event.target as Element | null)?.closest?.('td') ?? null);
      const row = cell?.parentElement as HTMLTableRowElement | undefined;
      if (!cell || this.table.isNew(cell)) return;
      const id = row?.dataset.id;
      if (id && !row.classList.contains('deleted')) this.select(id);
    });
    body.addEventListener('click', (event) => {
      const cell = cellOf(event.target);
      if (cell && cell !== this.editing.editingCell) this.table.activate(cell);
    });
    body.addEventListener('dblclick', (event) => {
      const cell = cellOf(event.target);
      if (cell && !this.refuseEdit(cell)) this.editing.start(cell);
    });
    body.addEventListener('keydown', (event) => {
      const cell = cellOf(event.target);
      if (!cell) return;
      const moves: Record<string, [number, number]> = {
        ArrowUp: [-1, 0],
        ArrowDown: [1, 0],
        ArrowLeft: [0, -1],
        ArrowRight: [0, 1],
      };
      const move = moves[event.key];
      if (move) {
        event.preventDefault();
        const next = this.table.neighbour(cell, ...move);
        if (next) this.table.activate(next);
      } else if (event.key === 'Enter' || event.key === 'F2') {
        event.preventDefault();
        if (!this.refuseEdit(cell)) this.editing.start(cell);
      } else if (event.key.length === 1 && !event.ctrlKey && !event.metaKey && !event.altKey) {
        // Typing over a cell replaces its value, as in a spreadsheet.
        event.preventDefault();
        if (!this.refuseEdit(cell)) this.editing.start(cell, event.key);
      }
    });
    body.addEventListener('paste', (event) => {
      const cell = cellOf(event.target);
      const text = event.clipboardData?.getData('text/plain');
      const key = this.key();
      if (!cell || !text || !key) return;
      event.preventDefault();
      void pasteRows(
        {
          key,
          object: this.el.object.value,
          table: this.table,
          records: this.records,
          wrote: (changeSetId) => this.wrote(changeSetId),
        },
        cell,
        text,
      ).then(
        (summary) => {
          this.showError(undefined);
          this.el.status.textContent = summary;
        },
        (error: unknown) => this.showError(error),
      );
    });
  }

  private showError(error: unknown): void {
    showError(this.el.error, error);
  }
}
