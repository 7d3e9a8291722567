import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ESCAPES[char]);
}

/** GitHub-flavoured Markdown (tables included); raw HTML the model writes is shown as text, never parsed. */
const markdown = new Marked({
  gfm: true,
  async: false,
  renderer: {
    html({ text }) {
      return escapeHtml(text);
    },
  },
});

/**
 * The model's Markdown as sanitized HTML. Escaping raw HTML already keeps tags out; DOMPurify is the
 * second wall (a link's `javascript:` URL, anything a Markdown quirk lets through), so nothing the
 * model writes can run script in the page that holds the API key.
 */
export function renderMarkdown(text: string): string {
  // Trimmed: marked ends every block with a newline, which would become a stray text node.
  const html = markdown.parse(text, { async: false }).trim();
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'form', 'input'] });
}
