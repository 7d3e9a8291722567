import { apiGet, apiPath, type FieldSummary, type ObjectDescription, type RecordPage } from './api';
import { showError } from './dom';

const PAGE_SIZE = 25;
/** Longest value shown in a cell; the full value is in the cell's title. */
const MAX_CELL_CHARS = 120;

export interface RecordsElements {
  form: HTMLFormElement;
  object: HTMLSelectElement;
  where: HTMLTextAreaElement;
  error: HTMLElement;
  table: HTMLTableElement;
  caption: HTMLElement;
  prev: HTMLButtonElement;
  next: HTMLButtonElement;
  pageInfo: HTMLElement;
}

function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  // Numbers, booleans, and the JSON of json, multiselect and other structured values.
  return JSON.stringify(value) ?? '';
}

/** The object browser: pick an object, filter with a `where`, page through its records. */
export class RecordsView {
  private offset = 0;
  private fields: FieldSummary[] = [];
  private loading?: AbortController;

  constructor(
    private readonly el: RecordsElements,
    private readonly key: () => string | undefined,
  ) {
    el.form.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.load(0);
    });
    el.object.addEventListener('change', () => void this.describeAndLoad());
    el.prev.addEventListener('click', () => void this.load(Math.max(0, this.offset - PAGE_SIZE)));
    el.next.addEventListener('click', () => void this.load(this.offset + PAGE_SIZE));
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
    await this.describeAndLoad();
  }

  reset(): void {
    this.loading?.abort();
    this.el.object.replaceChildren();
    this.el.object.disabled = true;
    this.el.table.tHead?.replaceChildren();
    this.el.table.tBodies[0]?.replaceChildren();
    this.el.caption.textContent = 'No object selected';
    this.el.pageInfo.textContent = '';
    this.el.prev.disabled = true;
    this.el.next.disabled = true;
    this.showError(undefined);
  }

  private async describeAndLoad(): Promise<void> {
    const key = this.key();
    const name = this.el.object.value;
    if (!key || !name) return;
    try {
      this.fields = (await apiGet<ObjectDescription>(key, apiPath('objects', name))).fields;
    } catch (error) {
      this.showError(error);
      return;
    }
    await this.load(0);
  }

  private async load(offset: number): Promise<void> {
    const key = this.key();
    const name = this.el.object.value;
    if (!key || !name) return;
    const params = new URLSearchParams({ limit: String(PAGE_SIZE), offset: String(offset) });
    // The text goes as typed: the server is the judge of the filter, and its error names the problem.
    const where = this.el.where.value.trim();
    if (where) params.set('where', where);
    this.loading?.abort();
    const loading = new AbortController();
    this.loading = loading;
    this.el.table.setAttribute('aria-busy', 'true');
    try {
      const page = await apiGet<RecordPage>(key, `${apiPath('objects', name, 'records')}?${params}`, loading.signal);
      this.offset = page.offset;
      this.showError(undefined);
      this.renderPage(name, page);
    } catch (error) {
      if (loading.signal.aborted) return;
      this.showError(error);
    } finally {
      if (this.loading === loading) this.el.table.removeAttribute('aria-busy');
    }
  }

  private renderPage(name: string, page: RecordPage): void {
    const columns = ['id', ...this.fields.map((field) => field.name)];
    const labels = new Map(this.fields.map((field) => [field.name, field.label || field.name]));
    const headRow = document.createElement('tr');
    for (const column of columns) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.textContent = labels.get(column) ?? column;
      th.title = column;
      headRow.append(th);
    }
    this.el.table.tHead!.replaceChildren(headRow);
    const rows = page.records.map((record) => {
      const tr = document.createElement('tr');
      for (const column of columns) {
        const td = document.createElement('td');
        const text = cellText(record[column]);
        td.textContent = text.length > MAX_CELL_CHARS ? `${text.slice(0, MAX_CELL_CHARS)}…` : text;
        if (text.length > MAX_CELL_CHARS) td.title = text;
        tr.append(td);
      }
      return tr;
    });
    this.el.table.tBodies[0].replaceChildren(...rows);
    const first = page.records.length ? page.offset + 1 : 0;
    const last = page.offset + page.records.length;
    this.el.caption.textContent = `Records of ${name}`;
    const total = page.totalExact ? String(page.total) : `about ${page.total}`;
    this.el.pageInfo.textContent = page.total ? `${first}–${last} of ${total}` : 'No records match';
    this.el.prev.disabled = page.offset === 0;
    // The page says whether another follows, also when its total is an estimate.
    this.el.next.disabled = page.nextCursor === null;
  }

  private showError(error: unknown): void {
    showError(this.el.error, error);
  }
}
