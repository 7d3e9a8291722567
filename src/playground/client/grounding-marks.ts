/** Where a figure the server filled in from a reference came from: the call, the row (from 1), the column, the value. */
export interface FigureReceipt {
  ref: string;
  /** The figure as the answer shows it. */
  text: string;
  toolCallId: string;
  tool: string;
  /** Absent for a value result (calculate's). */
  row?: number;
  column: string;
  value: unknown;
}

/** Access that shaped the results an answer used: the caller's row filter, or fields hidden from it. */
export interface GroundingCaveat {
  object: string;
  kind: 'row_filter' | 'hidden_fields' | (string & {});
  /** Hidden fields the caller named itself (never the others). */
  fields?: string[];
}

/** The `data-grounding` part of an answer: which figures the turn's data results support, and why the others not. */
export interface AnswerGrounding {
  /** `row` is the index of the cell's row (from 0); `ref`, of a figure filled in from a reference. */
  supported: Array<{ text: string; toolCallId: string; row?: number; column?: string; ref?: string }>;
  /** `ref`, of a reference: as the model wrote it (`{{r1.2.total}}`). */
  unsupported: Array<{ text: string; reason: string; ref?: string }>;
  receipts?: FigureReceipt[];
  caveats?: GroundingCaveat[];
}

interface Figure {
  text: string;
  className: 'grounded' | 'unsupported';
  title: string;
  /** Of a figure filled in from a reference: the index of its receipt in the grounding's receipts. */
  receipt?: number;
}

/** A figure stands alone: no letter or digit touches it, nor a separator that continues a number (1,2 or 3.4). */
function standsAlone(text: string, start: number, end: number): boolean {
  const before = text.slice(Math.max(0, start - 2), start);
  const after = text.slice(end, end + 2);
  return !/[\p{L}\p{N}]$|\p{N}[.,]$/u.test(before) && !/^[\p{L}\p{N}]|^[.,]\p{N}/u.test(after);
}

/** Wraps the first free occurrence of the figure in a text node of `root` in a mark; false when there is none. */
function markFirst(root: HTMLElement, figure: Figure): boolean {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) => (node.parentElement?.closest('mark, code, pre') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  for (let node = walker.nextNode() as Text | null; node; node = walker.nextNode() as Text | null) {
    const value = node.data;
    for (let at = value.indexOf(figure.text); at >= 0; at = value.indexOf(figure.text, at + 1)) {
      if (!standsAlone(value, at, at + figure.text.length)) continue;
      const figureNode = node.splitText(at);
      figureNode.splitText(figure.text.length);
      const mark = document.createElement('mark');
      mark.className = figure.className;
      mark.title = figure.title;
      if (figure.receipt !== undefined) {
        // A figure with a receipt opens it: a control, reachable from the keyboard.
        mark.classList.add('referenced');
        mark.dataset.receipt = String(figure.receipt);
        mark.tabIndex = 0;
        mark.setAttribute('role', 'button');
        mark.setAttribute('aria-expanded', 'false');
        mark.title = `${figure.title}; open its receipt`;
      }
      figureNode.replaceWith(mark);
      mark.append(figureNode);
      return true;
    }
  }
  return false;
}

/** `{{r1.2.total|compact}}` or `r1.2.total` → `r1.2.total`: a reference as receipts name it. */
export function plainRef(ref: string): string {
  return ref
    .replace(/^\{\{\s*|\s*\}\}$/g, '')
    .replace(/\s*\|.*$/, '')
    .trim();
}

/** Hands out each receipt once, to the first figure with its reference and text. */
function receiptFinder(receipts: readonly FigureReceipt[]): (ref: string | undefined, text: string) => number | undefined {
  const taken = new Set<number>();
  return (ref, text) => {
    if (ref === undefined) return undefined;
    const wanted = plainRef(ref);
    const index = receipts.findIndex((receipt, i) => !taken.has(i) && receipt.ref === wanted && receipt.text === text);
    if (index < 0) return undefined;
    taken.add(index);
    return index;
  };
}

/**
 * Marks each figure of the grounding in the rendered answer, in its text nodes (never by rewriting
 * HTML): a supported one with where its value came from, an unsupported one with the reason. A
 * figure stated twice is listed twice, so each listing marks the next free occurrence. A figure the
 * server filled in from a reference is also `referenced`: focusable, with the index of its receipt.
 */
export function markGrounding(root: HTMLElement, grounding: AnswerGrounding, toolNames: ReadonlyMap<string, string>): void {
  const receiptOf = receiptFinder(grounding.receipts ?? []);
  const figures: Figure[] = [
    ...grounding.supported.map((figure) => ({
      text: figure.text,
      className: 'grounded' as const,
      title: [
        `from ${toolNames.get(figure.toolCallId) ?? figure.toolCallId}`,
        figure.row === undefined ? undefined : `row ${figure.row + 1}`,
        figure.column === undefined ? undefined : `column ${figure.column}`,
      ]
        .filter((part) => part !== undefined)
        .join(', '),
      receipt: receiptOf(figure.ref, figure.text),
    })),
    ...grounding.unsupported.map((figure) => ({
      text: figure.text,
      className: 'unsupported' as const,
      title: `not supported by the data: ${figure.reason.replaceAll('_', ' ')}`,
      receipt: receiptOf(figure.ref, figure.text),
    })),
  ];
  // Longest first, so "1,200" is marked before a shorter figure could claim part of it.
  figures.sort((a, b) => b.text.length - a.text.length);
  for (const figure of figures) if (figure.text) markFirst(root, figure);
}

/**
 * The caveats as sentences, one per object: "Results for deal were limited by your access (row filter; hidden
 * fields: margin)". Hidden fields are named only when the grounding names them (those the caller named itself).
 */
export function caveatSentences(caveats: readonly GroundingCaveat[]): string[] {
  const byObject = new Map<string, string[]>();
  for (const caveat of caveats) {
    const how =
      caveat.kind === 'row_filter'
        ? 'row filter'
        : caveat.kind === 'hidden_fields'
          ? caveat.fields?.length
            ? `hidden fields: ${caveat.fields.join(', ')}`
            : 'hidden fields'
          : caveat.kind.replaceAll('_', ' ');
    byObject.set(caveat.object, [...(byObject.get(caveat.object) ?? []), how]);
  }
  return [...byObject].map(([object, hows]) => `Results for ${object} were limited by your access (${hows.join('; ')}).`);
}

/** The grounding of a `data-grounding` part's data, or undefined when it is not one. */
export function groundingOf(data: unknown): AnswerGrounding | undefined {
  const value = data as Partial<AnswerGrounding> | undefined;
  return Array.isArray(value?.supported) && Array.isArray(value.unsupported) ? (value as AnswerGrounding) : undefined;
}
