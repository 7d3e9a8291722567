import { ApiError } from './api';
import { showError } from './dom';
import type { Versioned } from './grid-api';
import { cellText } from './grid-values';
import {
  listTrash,
  recordHistory,
  restoreTrashed,
  restoreVersion,
  revertConflicts,
  type Actor,
  type RecordVersion,
  type RevertConflict,
  type TrashedRecord,
} from './history-api';

const ACTORS: Record<Actor, string> = { self: 'you', other: 'someone else', system: 'the system' };
const OPS: Record<RecordVersion['op'], string> = {
  create: 'Created',
  update: 'Updated',
  delete: 'Deleted',
  restore: 'Restored',
};

function element<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(text: string, className: string, label?: string): HTMLButtonElement {
  const node = element('button', className, text);
  node.type = 'button';
  if (label) node.setAttribute('aria-label', label);
  return node;
}

/** A value as a history line shows it: empty as an em dash. */
function valueText(value: unknown): string {
  return cellText(value) || '—';
}

function when(at: string): string {
  const date = new Date(at);
  return Number.isNaN(date.getTime()) ? at : date.toLocaleString();
}

/** What a refused revert names: one line per field (or record) that changed since, with the value expected and now. */
export function conflictList(conflicts: RevertConflict[]): HTMLUListElement {
  const list = element('ul', 'revert-conflicts');
  for (const conflict of conflicts) {
    const item = element('li');
    item.dataset.recordId = conflict.id;
    item.dataset.field = conflict.field ?? '';
    const what = conflict.field === null ? 'the record itself' : conflict.field;
    item.append(
      `Record ${conflict.id}, ${what}: expected `,
      element('code', 'expected', valueText(conflict.expected)),
      ', now ',
      element('code', 'current', valueText(conflict.current)),
    );
    list.append(item);
  }
  return list;
}

/** The conflicts of an error when it is a 409 revert_conflict; undefined for any other error. */
export function conflictsOf(error: unknown): RevertConflict[] | undefined {
  return error instanceof ApiError && error.code === 'revert_conflict' ? revertConflicts(error.details) : undefined;
}

export interface PanelContext {
  key(): string | undefined;
  object(): string;
}

export interface HistoryElements {
  panel: HTMLElement;
  title: HTMLElement;
  error: HTMLElement;
  list: HTMLOListElement;
  more: HTMLButtonElement;
  close: HTMLButtonElement;
}

/**
 * A record's history: each version (newest first) with who wrote it, when and how, each field before → after, and
 * a Restore button that writes the record back to that version (as a new version, of a change set of its own).
 */
export class HistoryPanel {
  private id?: string;
  private cursor: string | null = null;
  /** Bumped by every opening, so that a slower earlier read gives way. */
  private openings = 0;

  constructor(
    private readonly el: HistoryElements,
    private readonly ctx: PanelContext & { restored(id: string, version: string, written: Versioned): void },
  ) {
    el.close.addEventListener('click', () => this.close());
    el.more.addEventListener('click', () => void this.read(this.openings));
  }

  get recordId(): string | undefined {
    return this.el.panel.hidden ? undefined : this.id;
  }

  async open(id: string): Promise<void> {
    this.id = id;
    this.cursor = null;
    const opening = ++this.openings;
    this.el.title.textContent = `History of record ${id}`;
    this.el.list.replaceChildren();
    showError(this.el.error, undefined);
    this.el.panel.hidden = false;
    this.el.panel.dataset.recordId = id;
    await this.read(opening);
    if (opening === this.openings) this.el.title.focus();
  }

  close(): void {
    this.openings++;
    this.id = undefined;
    this.el.panel.hidden = true;
    this.el.list.replaceChildren();
  }

  /** The next page of versions (the first when the cursor is null and the list empty). */
  private async read(opening: number): Promise<void> {
    const key = this.ctx.key();
    const id = this.id;
    if (!key || !id) return;
    this.el.list.setAttribute('aria-busy', 'true');
    try {
      const page = await recordHistory(key, this.ctx.object(), id, this.cursor ?? undefined);
      if (opening !== this.openings) return;
      const newest = this.el.list.children.length === 0;
      page.versions.forEach((version, index) => this.el.list.append(this.item(id, version, newest && index === 0)));
      this.cursor = page.nextCursor;
      this.el.more.hidden = page.nextCursor === null;
    } catch (error) {
      if (opening === this.openings) showError(this.el.error, error);
    } finally {
      if (opening === this.openings) this.el.list.removeAttribute('aria-busy');
    }
  }

  private item(id: string, version: RecordVersion, current: boolean): HTMLLIElement {
    const item = element('li', 'version');
    item.dataset.version = version.version;
    item.dataset.op = version.op;
    item.dataset.via = version.via;
    item.dataset.actor = version.actor;
    const heading = element('p', 'version-title');
    heading.append(
      element('strong', undefined, `${OPS[version.op] ?? version.op} by ${ACTORS[version.actor] ?? version.actor}`),
      ` via ${version.via}, `,
      element('time', undefined, when(version.at)),
      ` (version ${version.version})`,
    );
    heading.querySelector('time')!.dateTime = version.at;
    item.append(heading);
    const fields = Object.entries(version.changes);
    if (fields.length) {
      const table = element('table', 'version-changes');
      table.createCaption().textContent = `Fields changed in version ${version.version}`;
      const head = table.createTHead().insertRow();
      for (const title of ['Field', 'Before', 'After']) {
        const th = element('th', undefined, title);
        th.scope = 'col';
        head.append(th);
      }
      const body = table.createTBody();
      for (const [field, { before, after }] of fields) {
        const row = body.insertRow();
        row.dataset.field = field;
        const name = element('th', 'field', field);
        name.scope = 'row';
        row.append(name, element('td', 'before', valueText(before)), element('td', 'after', valueText(after)));
      }
      item.append(table);
    }
    if (current) {
      item.append(element('p', 'version-current', 'This is the record now.'));
    } else if (version.op !== 'delete') {
      const restore = button('Restore', 'restore-version', `Restore version ${version.version} of record ${id}`);
      restore.addEventListener('click', () => void this.restore(id, version.version, restore));
      item.append(restore);
    }
    return item;
  }

  private async restore(id: string, version: string, control: HTMLButtonElement): Promise<void> {
    const key = this.ctx.key();
    if (!key) return;
    control.disabled = true;
    try {
      const written = await restoreVersion(key, this.ctx.object(), id, version);
      showError(this.el.error, undefined);
      this.ctx.restored(id, version, written);
      // The restore is a version of its own: the list starts again from it.
      if (this.id === id) await this.open(id);
    } catch (error) {
      control.disabled = false;
      showError(this.el.error, error);
    }
  }
}

export interface TrashElements {
  panel: HTMLElement;
  error: HTMLElement;
  list: HTMLUListElement;
  empty: HTMLElement;
  more: HTMLButtonElement;
  close: HTMLButtonElement;
}

/** The object's trash: deleted records, most recent first, each with Restore (which answers 409 if its unique values were taken). */
export class TrashPanel {
  private cursor: string | null = null;
  private openings = 0;

  constructor(
    private readonly el: TrashElements,
    private readonly ctx: PanelContext & { restored(id: string, written: Versioned): void },
  ) {
    el.close.addEventListener('click', () => this.close());
    el.more.addEventListener('click', () => void this.read(this.openings));
  }

  get isOpen(): boolean {
    return !this.el.panel.hidden;
  }

  async open(): Promise<void> {
    const opening = ++this.openings;
    this.cursor = null;
    this.el.list.replaceChildren();
    showError(this.el.error, undefined);
    this.el.panel.hidden = false;
    await this.read(opening);
  }

  close(): void {
    this.openings++;
    this.el.panel.hidden = true;
    this.el.list.replaceChildren();
  }

  private async read(opening: number): Promise<void> {
    const key = this.ctx.key();
    if (!key) return;
    this.el.list.setAttribute('aria-busy', 'true');
    try {
      const page = await listTrash(key, this.ctx.object(), this.cursor ?? undefined);
      if (opening !== this.openings) return;
      for (const trashed of page.records) this.el.list.append(this.item(trashed));
      this.cursor = page.nextCursor;
      this.el.more.hidden = page.nextCursor === null;
      this.el.empty.hidden = this.el.list.children.length > 0;
    } catch (error) {
      if (opening === this.openings) showError(this.el.error, error);
    } finally {
      if (opening === this.openings) this.el.list.removeAttribute('aria-busy');
    }
  }

  private item(trashed: TrashedRecord): HTMLLIElement {
    const item = element('li', 'trashed');
    item.dataset.id = trashed.id;
    const fields = Object.entries(trashed.record).filter(
      ([name]) => !['id', 'created_at', 'updated_at', 'changeSetId'].includes(name),
    );
    const summary = element('p', 'trashed-summary');
    summary.append(
      element('strong', undefined, `Record ${trashed.id}`),
      `, deleted by ${ACTORS[trashed.actor] ?? trashed.actor} `,
    );
    const time = element('time', undefined, when(trashed.deletedAt));
    time.dateTime = trashed.deletedAt;
    summary.append(time);
    const values = element('dl', 'trashed-values');
    for (const [name, value] of fields) values.append(element('dt', undefined, name), element('dd', undefined, valueText(value)));
    const restore = button('Restore', 'restore-trashed', `Restore record ${trashed.id} from the trash`);
    restore.addEventListener('click', () => void this.restore(trashed.id, item, restore));
    item.append(summary, values, restore);
    return item;
  }

  private async restore(id: string, item: HTMLLIElement, control: HTMLButtonElement): Promise<void> {
    const key = this.ctx.key();
    if (!key) return;
    control.disabled = true;
    try {
      const written = await restoreTrashed(key, this.ctx.object(), id);
      showError(this.el.error, undefined);
      item.remove();
      this.el.empty.hidden = this.el.list.children.length > 0;
      this.ctx.restored(id, written);
    } catch (error) {
      control.disabled = false;
      showError(this.el.error, error);
    }
  }
}
