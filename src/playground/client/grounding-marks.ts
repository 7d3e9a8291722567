/** The `data-grounding` part of an answer: which figures the turn's data results support, and why the others not. */
export interface AnswerGrounding {
  supported: Array<{ text: string; toolCallId: string; row?: number; column?: string }>;
  unsupported: Array<{ text: string; reason: string }>;
}

interface Figure {
  text: string;
  className: 'grounded' | 'unsupported';
  title: string;
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
      figureNode.replaceWith(mark);
      mark.append(figureNode);
      return true;
    }
  }
  return false;
}

/**
 * Marks each figure of the grounding in the rendered answer, in its text nodes (never by rewriting
 * HTML): a supported one with where its value came from, an unsupported one with the reason. A
 * figure stated twice is listed twice, so each listing marks the next free occurrence.
 */
export function markGrounding(root: HTMLElement, grounding: AnswerGrounding, toolNames: ReadonlyMap<string, string>): void {
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
    })),
    ...grounding.unsupported.map((figure) => ({
      text: figure.text,
      className: 'unsupported' as const,
      title: `not supported by the data: ${figure.reason.replaceAll('_', ' ')}`,
    })),
  ];
  // Longest first, so "1,200" is marked before a shorter figure could claim part of it.
  figures.sort((a, b) => b.text.length - a.text.length);
  for (const figure of figures) if (figure.text) markFirst(root, figure);
}

/** The grounding of a `data-grounding` part's data, or undefined when it is not one. */
export function groundingOf(data: unknown): AnswerGrounding | undefined {
  const value = data as Partial<AnswerGrounding> | undefined;
  return Array.isArray(value?.supported) && Array.isArray(value.unsupported) ? (value as AnswerGrounding) : undefined;
}
