import { getToolName, isToolUIPart, type DynamicToolUIPart, type ToolUIPart, type UIMessage } from 'ai';
import {
  createApprovalCard,
  proposalOf,
  updateApprovalCard,
  type ApprovalDecision,
  type Proposal,
  type UndoChangeSet,
} from './approval-card';
import { drawChart } from './chart';
import { caveatSentences, groundingOf, markGrounding, type AnswerGrounding } from './grounding-marks';
import { renderMarkdown } from './markdown';
import { createReceiptPanel, hideReceipt, showReceipt, type ReceiptCall, type ReceiptReplayer } from './receipt-view';

type ToolPart = ToolUIPart | DynamicToolUIPart;

const TOOL_STATE_LABELS: Record<ToolPart['state'], string> = {
  'input-streaming': 'preparing',
  'input-available': 'running',
  'approval-requested': 'awaiting approval',
  'approval-responded': 'approval given',
  'output-available': 'done',
  'output-error': 'failed',
  'output-denied': 'denied',
};

/** Longest JSON shown in a tool card; a big result is cut, the model still got all of it. */
const MAX_JSON_CHARS = 20_000;

function json(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value, null, 2) ?? 'undefined';
  } catch {
    text = String(value);
  }
  return text.length > MAX_JSON_CHARS
    ? `${text.slice(0, MAX_JSON_CHARS)}\n… (${text.length - MAX_JSON_CHARS} more characters)`
    : text;
}

function element<K extends keyof HTMLElementTagNameMap>(tag: K, className?: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function setText(node: Element, text: string): void {
  if (node.textContent !== text) node.textContent = text;
}

/** An answer's Markdown as sanitized HTML, re-rendered only when its text changed (each streamed delta). */
const renderedSources = new WeakMap<HTMLElement, string>();

/** The grounding of the answer with the names of its tool calls, for the titles of its marks. */
interface Grounded {
  grounding: AnswerGrounding;
  toolNames: ReadonlyMap<string, string>;
}

function setMarkdown(node: HTMLElement, text: string, grounded?: Grounded): void {
  // The grounding arrives after the text: a new one re-renders the answer, which is then marked afresh.
  const source = grounded ? `${text}\u0000${JSON.stringify(grounded.grounding)}` : text;
  if (renderedSources.get(node) === source) return;
  renderedSources.set(node, source);
  node.innerHTML = renderMarkdown(text);
  if (grounded) markGrounding(node, grounded.grounding, grounded.toolNames);
}

/** The message's grounding (its `data-grounding` part), with the tool name of each call id. */
function groundedOf(message: UIMessage): Grounded | undefined {
  const part = message.parts.find((candidate) => candidate.type === 'data-grounding');
  const grounding = part && groundingOf((part as { data?: unknown }).data);
  if (!grounding) return undefined;
  const toolNames = new Map<string, string>();
  for (const candidate of message.parts) if (isToolUIPart(candidate)) toolNames.set(candidate.toolCallId, getToolName(candidate));
  return { grounding, toolNames };
}

interface ChartData {
  toolCallId: string;
  spec: unknown;
}

/** The chart of a `data-chart` part (sent after a visualize call), or undefined for any other part. */
function chartOf(part: UIMessage['parts'][number]): ChartData | undefined {
  if (part.type !== 'data-chart') return undefined;
  const data = (part as { data?: Partial<ChartData> }).data;
  return typeof data?.toolCallId === 'string' && data.spec ? { toolCallId: data.toolCallId, spec: data.spec } : undefined;
}

/** A figure the chart is drawn into once (its spec never changes); a spec Vega refuses shows as a note. */
function createChart(spec: unknown): HTMLElement {
  const figure = element('figure', 'chart');
  drawChart(figure, spec).catch((error: unknown) => {
    figure.replaceChildren(
      element('p', 'chart-error', `The chart could not be drawn: ${error instanceof Error ? error.message : String(error)}`),
    );
  });
  return figure;
}

/**
 * Renders the conversation into the log element. Each message and part keeps its element across
 * updates (keyed by message id and part position), so a streamed delta changes one text node, an
 * opened tool card stays open, and screen readers hear only what was added.
 */
export class ChatView {
  private readonly messageNodes = new Map<string, HTMLElement>();
  /**
   * The write proposals seen, by tool name and call id: a conversation fetched again after a decision holds
   * the call and its outcome but no longer the approval request, and its card still shows the diff decided on.
   */
  private readonly proposals = new Map<string, Proposal>();
  /** The conversation last rendered: where a receipt finds its call and the other receipts. */
  private messages: UIMessage[] = [];
  /** Numbers the receipt panels' ids. */
  private panels = 0;

  constructor(
    private readonly log: HTMLElement,
    /** A person approved or rejected a write proposal on its card. */
    private readonly onDecision: (decision: ApprovalDecision) => void = () => undefined,
    /** How a receipt's Re-run runs its call again, for the chat open now (none: the chat keeps no calls). */
    private readonly replayer: () => ReceiptReplayer = () => undefined,
    /** How "Undo this change" of a written proposal reverts its change set (none: no undo offered). */
    private readonly undo?: UndoChangeSet,
  ) {
    // A referenced figure opens its receipt on a click, or on Enter or Space when it has the focus.
    log.addEventListener('click', (event) => {
      const mark = (event.target as Element | null)?.closest?.('mark.referenced');
      if (mark instanceof HTMLElement) this.toggleReceipt(mark);
    });
    log.addEventListener('keydown', (event) => {
      const target = event.target as Element | null;
      if (target instanceof HTMLElement && target.matches('mark.referenced') && (event.key === 'Enter' || event.key === ' ')) {
        event.preventDefault();
        this.toggleReceipt(target);
      } else if (event.key === 'Escape') {
        const panel = target?.closest?.('.receipt');
        if (panel instanceof HTMLElement) this.closeReceipt(panel);
      }
    });
  }

  clear(placeholder: string): void {
    this.messages = [];
    this.messageNodes.clear();
    this.log.replaceChildren(element('p', 'empty', placeholder));
  }

  render(messages: UIMessage[]): void {
    this.messages = messages;
    const wanted = new Set(messages.map((message) => message.id));
    for (const [id, node] of this.messageNodes) {
      if (!wanted.has(id)) {
        node.remove();
        this.messageNodes.delete(id);
      }
    }
    if (messages.length > 0) this.log.querySelector(':scope > .empty')?.remove();
    let previous: HTMLElement | undefined;
    for (const message of messages) {
      let node = this.messageNodes.get(message.id);
      if (!node) {
        node = this.createMessage(message);
        this.messageNodes.set(message.id, node);
      }
      // Keep the DOM order equal to the conversation order (a resumed stream may replace a message).
      const expectedPosition: ChildNode | null = previous ? previous.nextSibling : this.log.firstChild;
      if (expectedPosition !== node) this.log.insertBefore(node, expectedPosition);
      this.updateParts(node, message);
      previous = node;
    }
    this.log.scrollTop = this.log.scrollHeight;
  }

  private createMessage(message: UIMessage): HTMLElement {
    const node = element('article', `message ${message.role}`);
    node.dataset.messageId = message.id;
    node.append(element('h3', 'speaker', message.role === 'user' ? 'You' : 'Agent'));
    node.append(element('div', 'parts'));
    if (message.role === 'assistant') {
      // Under the answer: the access that shaped its results, and the receipt of the figure opened.
      const caveats = element('ul', 'caveats');
      caveats.hidden = true;
      caveats.setAttribute('aria-label', 'What your access left out');
      node.append(caveats, createReceiptPanel(`receipt-${++this.panels}`));
    }
    return node;
  }

  /** The caveats of the answer's grounding, one line per object; hidden when there are none. */
  private updateCaveats(node: HTMLElement, grounded: Grounded | undefined): void {
    const list = node.querySelector<HTMLElement>(':scope > .caveats');
    if (!list) return;
    const lines = caveatSentences(grounded?.grounding.caveats ?? []);
    if (lines.join('\n') === [...list.children].map((item) => item.textContent).join('\n')) return;
    list.replaceChildren(...lines.map((line) => element('li', undefined, line)));
    list.hidden = lines.length === 0;
  }

  /** Opens the receipt of a referenced figure under its answer, or closes it when it is the one open. */
  private toggleReceipt(mark: HTMLElement): void {
    const node = mark.closest<HTMLElement>('article.message');
    const panel = node?.querySelector<HTMLElement>(':scope > .receipt');
    const message = this.messages.find((candidate) => candidate.id === node?.dataset.messageId);
    const grounded = message && groundedOf(message);
    const receipt = grounded?.grounding.receipts?.[Number(mark.dataset.receipt)];
    if (!node || !panel || !message || !receipt) return;
    if (mark.getAttribute('aria-expanded') === 'true') {
      this.closeReceipt(panel);
      return;
    }
    for (const other of node.querySelectorAll('mark.referenced[aria-expanded="true"]'))
      other.setAttribute('aria-expanded', 'false');
    mark.setAttribute('aria-expanded', 'true');
    mark.setAttribute('aria-controls', panel.id);
    showReceipt(
      panel,
      {
        receipt,
        call: this.callOf(receipt.toolCallId, message),
        receipts: this.messages.flatMap((candidate) => groundedOf(candidate)?.grounding.receipts ?? []),
        replayer: this.replayer(),
      },
      () => this.closeReceipt(panel),
    );
  }

  /** Closes a receipt panel; the focus goes back to the figure that opened it. */
  private closeReceipt(panel: HTMLElement): void {
    const opener = panel.parentElement?.querySelector<HTMLElement>('mark.referenced[aria-expanded="true"]');
    opener?.setAttribute('aria-expanded', 'false');
    hideReceipt(panel);
    opener?.focus();
  }

  /** The call of a receipt from its tool part: in the answer itself first, else in an earlier message. */
  private callOf(toolCallId: string, message: UIMessage): ReceiptCall | undefined {
    for (const candidate of [message, ...this.messages]) {
      const part = candidate.parts.find((p): p is ToolPart => isToolUIPart(p) && p.toolCallId === toolCallId);
      if (part) return { input: part.input, output: part.state === 'output-available' ? part.output : undefined };
    }
    return undefined;
  }

  private updateParts(node: HTMLElement, message: UIMessage): void {
    const container = node.querySelector<HTMLElement>(':scope > .parts')!;
    const grounded = message.role === 'assistant' ? groundedOf(message) : undefined;
    // The grounding checks the final answer: the last text part.
    const lastText = message.parts.findLastIndex((part) => part.type === 'text');
    let index = 0;
    for (const [position, part] of message.parts.entries()) {
      const chart = chartOf(part);
      // A write proposal (a tool part with an approval request) gets the approval card, not the tool card.
      const proposal = isToolUIPart(part) ? this.proposalOf(part) : undefined;
      const key = isToolUIPart(part)
        ? `${proposal ? 'approval' : 'tool'}:${part.toolCallId}`
        : part.type === 'text'
          ? `text:${index}`
          : chart
            ? `chart:${chart.toolCallId}`
            : undefined;
      if (key === undefined) continue; // step boundaries, other data parts, reasoning: nothing to show
      let child = container.children.item(index) as HTMLElement | null;
      if (!child || child.dataset.key !== key) {
        const created = isToolUIPart(part)
          ? proposal
            ? createApprovalCard(part, proposal, this.onDecision, this.undo)
            : this.createToolCard()
          : chart
            ? createChart(chart.spec)
            : element('div', message.role === 'user' ? 'text' : 'answer');
        created.dataset.key = key;
        container.insertBefore(created, child);
        child = created;
      }
      if (isToolUIPart(part)) {
        if (proposal) updateApprovalCard(child, part, proposal);
        else this.updateToolCard(child, part);
      } else if (part.type === 'text') {
        if (message.role === 'user') setText(child, part.text);
        else setMarkdown(child, part.text, position === lastText ? grounded : undefined);
      }
      index += 1;
    }
    while (container.children.length > index) container.lastElementChild!.remove();
    if (message.role === 'assistant') this.updateCaveats(node, grounded);
  }

  private proposalOf(part: ToolPart): Proposal | undefined {
    const proposal = proposalOf(part);
    const key = `${getToolName(part)}:${part.toolCallId}`;
    if (proposal) this.proposals.set(key, proposal);
    return proposal ?? this.proposals.get(key);
  }

  private createToolCard(): HTMLElement {
    const card = element('details', 'tool-call');
    const summary = element('summary');
    summary.append(element('span', 'tool-label', 'Tool '), element('code', 'tool-name'), element('span', 'tool-state'));
    card.append(
      summary,
      element('h4', undefined, 'Input'),
      element('pre', 'tool-input'),
      element('h4', 'result-title', 'Result'),
    );
    card.append(element('pre', 'tool-output'));
    return card;
  }

  private updateToolCard(card: HTMLElement, part: ToolPart): void {
    card.dataset.state = part.state;
    setText(card.querySelector('.tool-name')!, getToolName(part));
    setText(card.querySelector('.tool-state')!, ` · ${TOOL_STATE_LABELS[part.state] ?? part.state}`);
    setText(card.querySelector('.tool-input')!, part.input === undefined ? '…' : json(part.input));
    const output = card.querySelector('.tool-output')!;
    if (part.state === 'output-available') setText(output, json(part.output));
    else if (part.state === 'output-error') setText(output, part.errorText);
    else setText(output, '…');
  }
}
