import { ApiError } from './api';
import type { FigureReceipt } from './grounding-marks';

/** What POST …/receipts/replay answers: the figures of the call whose cell has another value now, and how many not. */
export interface ReceiptReplay {
  toolCallId: string;
  ranAt: string;
  changed: Array<{ ref: string; then: unknown; now: unknown }>;
  unchanged: number;
}

/** Runs a stored call again on the server (in a durable chat); undefined where the chat keeps no calls (stateless). */
export type ReceiptReplayer = ((toolCallId: string) => Promise<ReceiptReplay>) | undefined;

/** The call a receipt points at, as the conversation on the page holds it. */
export interface ReceiptCall {
  input: unknown;
  /** The result, when the page has it (not withheld, not failed). */
  output?: unknown;
}

/** Everything a receipt panel shows. */
export interface OpenReceipt {
  receipt: FigureReceipt;
  call?: ReceiptCall;
  /** Every receipt of the conversation: the figures a replay names, as the answers showed them. */
  receipts: readonly FigureReceipt[];
  replayer: ReceiptReplayer;
}

function element<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A value as a cell shows it: text as it is, anything else as JSON; none as an em dash. */
function valueText(value: unknown): string {
  if (value === null || value === undefined) return '—';
  if (typeof value === 'string') return value;
  return JSON.stringify(value) ?? '';
}

/** The rows of a data result (a page's records, an aggregate's rows), or the result itself when it is one record. */
function rowsOf(output: unknown): Array<Record<string, unknown>> {
  if (!isRecord(output)) return [];
  for (const key of ['records', 'rows']) {
    const list = output[key];
    if (Array.isArray(list)) return list.filter(isRecord);
  }
  return [output];
}

/** The row of the result the receipt cites: the one whose `ref` it extends (`r1.2` of `r1.2.total`), else by number. */
function citedRow(receipt: FigureReceipt, output: unknown): Record<string, unknown> | undefined {
  if (receipt.row === undefined) return undefined;
  const rows = rowsOf(output);
  const rowRef = receipt.ref.split('.').slice(0, 2).join('.');
  return rows.find((row) => row.ref === rowRef) ?? rows[receipt.row - 1];
}

/**
 * The columns of a row in the order the call asked for them (`fields`; `groupBy`, then the aggregations' aliases),
 * the others after: a stored result comes back with its keys in the database's order, not the call's.
 */
function columnsOf(row: Record<string, unknown>, input: unknown): string[] {
  const asked: string[] = ['id'];
  if (isRecord(input)) {
    for (const key of ['fields', 'groupBy']) {
      const list = input[key];
      if (Array.isArray(list)) asked.push(...list.filter((name): name is string => typeof name === 'string'));
    }
    if (Array.isArray(input.aggregations))
      for (const aggregation of input.aggregations)
        if (isRecord(aggregation) && typeof aggregation.alias === 'string') asked.push(aggregation.alias);
  }
  const keys = Object.keys(row).filter((key) => key !== 'ref' && key !== 'resultRef');
  const rank = (key: string) => (asked.includes(key) ? asked.indexOf(key) : asked.length + keys.indexOf(key));
  return keys.sort((a, b) => rank(a) - rank(b));
}

/** The row as a one-row table: a column per field (the server's `ref` left out), the cited one highlighted. */
function rowTable(row: Record<string, unknown>, input: unknown, column: string): HTMLTableElement {
  const cited = column.split('.')[0];
  const table = element('table', 'receipt-row');
  const head = element('tr');
  const body = element('tr');
  for (const field of columnsOf(row, input)) {
    const value = row[field];
    const th = element('th', field === cited ? 'cited' : undefined, field);
    th.scope = 'col';
    const td = element('td', field === cited ? 'cited' : undefined, valueText(value));
    if (field === cited) td.setAttribute('aria-label', `${valueText(value)} (the cited cell)`);
    head.append(th);
    body.append(td);
  }
  table.append(element('thead'), element('tbody'));
  table.tHead!.append(head);
  table.tBodies[0].append(body);
  return table;
}

/** A call's arguments, one per line (`groupBy: ["owner"]`): shorter than indented JSON, and as exact. */
function argumentsText(input: unknown): string {
  const compact = (value: unknown) => {
    try {
      return JSON.stringify(value) ?? String(value);
    } catch {
      return String(value);
    }
  };
  if (!isRecord(input)) return compact(input);
  // The object first: what the call read, then how.
  return Object.entries(input)
    .sort(([a], [b]) => Number(b === 'objectName') - Number(a === 'objectName'))
    .map(([name, value]) => `${name}: ${compact(value)}`)
    .join('\n');
}

/** The digits of a figure as written: `2,500,000.50` in `$2,500,000.50`, `2.500.000,50` in `2.500.000,50 $`. */
const NUMBER_RUN = /\d(?:[\d.,\u00a0\u202f' ]*\d)?/;

/** How a figure's digits are written: its decimal mark (and decimals after it) and its group separator. */
interface NumberStyle {
  decimal: string;
  decimals: number;
  /** Undefined: written without grouping. */
  group?: string;
}

/** The style under which `digits` read as `value`, trying `.` then `,` then no decimal mark; undefined when none does. */
function styleOf(digits: string, value: number): NumberStyle | undefined {
  for (const decimal of ['.', ',', '']) {
    const at = decimal ? digits.lastIndexOf(decimal) : -1;
    if (decimal && at < 0) continue;
    const whole = at < 0 ? digits : digits.slice(0, at);
    const fraction = at < 0 ? '' : digits.slice(at + 1);
    if (/\D/.test(fraction)) continue;
    const separators = new Set(whole.replace(/\d/g, ''));
    if (separators.size > 1 || separators.has(decimal)) continue;
    const read = Number(`${whole.replace(/\D/g, '')}.${fraction || '0'}`);
    if (Math.abs(read - Math.abs(value)) > 1e-9 * Math.max(1, Math.abs(read))) continue;
    // Too short to show its grouping: group as the decimal mark implies.
    const group = [...separators][0] ?? (whole.length > 3 ? undefined : decimal === ',' ? '.' : ',');
    return { decimal: decimal || (group === '.' ? ',' : '.'), decimals: fraction.length, group };
  }
  return undefined;
}

/**
 * `now` written as the answer wrote `then` (`$2,500,000.50` → `$2,510,000.00`): the same text around the digits, the
 * same separators and at least as many decimals, when the figure's digits are `then` itself. A compact figure
 * (`$2.5M`) or any other gets `now` plainly.
 */
export function formatLike(shown: string, then: unknown, now: unknown): string {
  if (typeof now !== 'number') return valueText(now);
  const plain = now.toLocaleString('en-US', { maximumFractionDigits: 6 });
  const run = typeof then === 'number' ? NUMBER_RUN.exec(shown) : null;
  const style = run ? styleOf(run[0], then as number) : undefined;
  if (!run || !style) return plain;
  const english = Math.abs(now).toLocaleString('en-US', {
    minimumFractionDigits: style.decimals,
    maximumFractionDigits: Math.max(style.decimals, 6),
    useGrouping: style.group !== undefined,
  });
  const written = english.replace(/[,.]/g, (char) => (char === ',' ? (style.group ?? '') : style.decimal));
  const before = shown.slice(0, run.index);
  const after = shown.slice(run.index + run[0].length);
  // The sign of `then` is in the text around its digits; one `now` needs and `then` lacked goes in front of them.
  const sign = now < 0 && (then as number) >= 0 ? '-' : '';
  const unsigned = now >= 0 && (then as number) < 0 ? before.replace(/[-\u2212](?=\D*$)/, '') : before;
  return `${unsigned}${sign}${written}${after}`;
}

/** What a replay found, in sentences: each changed figure (then, as the answer showed it; now, written alike), or none. */
function replayLines(replay: ReceiptReplay, receipts: readonly FigureReceipt[]): string[] {
  const used = new Set<number>();
  const lines = replay.changed.map((change) => {
    const index = receipts.findIndex(
      (receipt, i) =>
        !used.has(i) &&
        receipt.toolCallId === replay.toolCallId &&
        receipt.ref === change.ref &&
        JSON.stringify(receipt.value) === JSON.stringify(change.then),
    );
    if (index >= 0) used.add(index);
    const shown = index >= 0 ? receipts[index].text : valueText(change.then);
    const now = change.now === null ? 'no value (the row is gone)' : formatLike(shown, change.then, change.now);
    return `${change.ref}: then ${shown}, now ${now}`;
  });
  if (!replay.changed.length) {
    lines.push(
      replay.unchanged === 1
        ? 'Unchanged: the figure from this call is the same now.'
        : `Unchanged: the ${replay.unchanged} figures from this call are the same now.`,
    );
  } else if (replay.unchanged) {
    lines.push(`${replay.unchanged} other figure${replay.unchanged === 1 ? '' : 's'} unchanged.`);
  }
  return lines;
}

/** Why a replay found nothing to run, as a person should read it. */
function replayFailure(error: unknown): string {
  if (error instanceof ApiError && error.code === 'receipt_not_found') {
    return (
      'Nothing to re-run: this key may not see the result of this call (its access changed since the answer), ' +
      'or the call holds no data rows (receipt_not_found).'
    );
  }
  if (error instanceof ApiError && error.code === 'chat_not_found') {
    return 'Nothing to re-run: this key has no stored chat with this conversation (chat_not_found).';
  }
  if (error instanceof ApiError) return `The re-run failed: ${error.message} (${error.code}).`;
  return `The re-run failed: ${error instanceof Error ? error.message : String(error)}`;
}

/** The element a receipt opens in: one per answer, under it, empty and hidden until a figure is opened. */
export function createReceiptPanel(id: string): HTMLElement {
  const panel = element('section', 'receipt');
  panel.id = id;
  panel.hidden = true;
  return panel;
}

/**
 * Fills the panel with a receipt: the figure, the tool and the arguments of its call, the row with the cited
 * column highlighted, the column and the value; and Re-run, which runs the call again and says what changed.
 * Built with text nodes only: nothing of the data is parsed as HTML.
 */
export function showReceipt(panel: HTMLElement, open: OpenReceipt, onClose: () => void): void {
  const { receipt, call } = open;
  panel.hidden = false;
  panel.dataset.ref = receipt.ref;
  panel.setAttribute('aria-label', `Receipt of ${receipt.text}`);

  const title = element('h4', 'receipt-title');
  title.tabIndex = -1;
  title.append('Receipt of ', element('span', 'receipt-figure', receipt.text), ' ', element('code', 'receipt-ref', receipt.ref));
  const close = element('button', 'receipt-close', 'Close');
  close.type = 'button';
  close.setAttribute('aria-label', 'Close the receipt');
  close.addEventListener('click', onClose);
  const header = element('div', 'receipt-header');
  header.append(title, close);

  const facts = element('dl', 'receipt-facts');
  const fact = (label: string, ...content: Array<Node | string>) => {
    const term = element('dt', undefined, label);
    const detail = element('dd');
    detail.append(...content);
    facts.append(term, detail);
    return detail;
  };
  fact('Tool', element('code', 'receipt-tool', receipt.tool));
  fact(
    'Arguments',
    call
      ? element('pre', 'receipt-args', argumentsText(call.input))
      : element('span', 'receipt-missing', 'The call is not in this conversation on the page.'),
  );
  if (receipt.row !== undefined) {
    const row = call?.output === undefined ? undefined : citedRow(receipt, call.output);
    fact(
      `Row ${receipt.row}`,
      row
        ? rowTable(row, call?.input, receipt.column)
        : element('span', 'receipt-missing', 'The result of the call is not on the page (withheld or not loaded).'),
    );
  }
  fact('Column', element('code', 'receipt-column', receipt.column));
  fact('Value', element('code', 'receipt-value', valueText(receipt.value)), ` shown as ${receipt.text}`);

  const rerun = element('button', 'receipt-rerun', 'Re-run');
  rerun.type = 'button';
  const outcome = element('div', 'receipt-replay');
  outcome.setAttribute('role', 'status');
  const actions = element('div', 'receipt-actions');
  actions.append(rerun);
  if (open.replayer) {
    const replayer = open.replayer;
    rerun.addEventListener('click', () => {
      rerun.disabled = true;
      outcome.dataset.state = 'running';
      outcome.replaceChildren(element('p', undefined, 'Running the call again…'));
      replayer(receipt.toolCallId)
        .then((replay) => {
          outcome.dataset.state = replay.changed.length ? 'changed' : 'unchanged';
          const ran = new Date(replay.ranAt);
          const when = Number.isNaN(ran.getTime()) ? '' : ` at ${ran.toLocaleTimeString()}`;
          const list = element('ul', 'receipt-changes');
          for (const line of replayLines(replay, open.receipts)) list.append(element('li', undefined, line));
          outcome.replaceChildren(element('p', 'receipt-ran', `Ran again${when}:`), list);
        })
        .catch((error: unknown) => {
          outcome.dataset.state = 'failed';
          outcome.replaceChildren(element('p', 'receipt-failure', replayFailure(error)));
        })
        .finally(() => (rerun.disabled = false));
    });
  } else {
    rerun.disabled = true;
    actions.append(element('span', 'hint', 'Re-run needs a durable chat: a stateless one keeps no calls on the server.'));
  }

  panel.replaceChildren(header, facts, actions, outcome);
  title.focus();
}

/** Empties and hides the panel. */
export function hideReceipt(panel: HTMLElement): void {
  panel.hidden = true;
  delete panel.dataset.ref;
  panel.replaceChildren();
}
