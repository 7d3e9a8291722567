import { ApiError } from './api';

/** The element with this id, of the expected type; a page that lacks it is a build mistake, so this throws. */
export function byId<T extends HTMLElement>(id: string, type: { new (): T }): T {
  const node = document.getElementById(id);
  if (!(node instanceof type)) throw new Error(`#${id} is missing from the page`);
  return node;
}

/** Shows an error in an alert box: the API's code, then its message. `undefined` hides the box. */
export function showError(box: HTMLElement, error: unknown): void {
  if (error === undefined) {
    box.hidden = true;
    box.replaceChildren();
    return;
  }
  box.hidden = false;
  if (error instanceof ApiError) {
    const code = document.createElement('code');
    code.className = 'error-code';
    code.textContent = error.code;
    box.replaceChildren(code, ` ${error.message}`);
  } else {
    box.textContent = error instanceof Error ? error.message : typeof error === 'string' ? error : 'Something went wrong';
  }
}

/** 32 random hex characters: an id the durable chat routes accept ([A-Za-z0-9_-]), also on plain-HTTP origins. */
export function randomId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}
