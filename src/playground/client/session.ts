/**
 * What the page keeps for this tab only: sessionStorage, never localStorage or the URL, so the key (or
 * the access token of a sign-in) leaves with the tab and never lands in history, logs or a referrer.
 */
const KEYS = {
  apiKey: 'playground.apiKey',
  agent: 'playground.agent',
  durable: 'playground.durable',
  chatId: 'playground.chatId',
  signedIn: 'playground.signedIn',
} as const;

type Entry = keyof typeof KEYS;

function read(entry: Entry): string | undefined {
  try {
    return sessionStorage.getItem(KEYS[entry]) ?? undefined;
  } catch {
    return undefined; // storage disabled: the page still works, it just forgets on reload
  }
}

function write(entry: Entry, value: string | undefined): void {
  try {
    if (value === undefined) sessionStorage.removeItem(KEYS[entry]);
    else sessionStorage.setItem(KEYS[entry], value);
  } catch {
    // storage disabled or full: nothing to keep
  }
}

export const session = {
  apiKey: () => read('apiKey'),
  setApiKey: (value: string | undefined) => write('apiKey', value),
  agent: () => read('agent'),
  setAgent: (value: string | undefined) => write('agent', value),
  durable: () => read('durable') === 'true',
  setDurable: (value: boolean) => write('durable', value ? 'true' : 'false'),
  /** The durable chat's id (client-chosen), kept so that a reload finds the conversation again. */
  chatId: () => read('chatId'),
  setChatId: (value: string | undefined) => write('chatId', value),
  /** The identity provider's host when the Bearer in use is an access token from signing in there (not a pasted key). */
  signedIn: () => read('signedIn'),
  setSignedIn: (value: string | undefined) => write('signedIn', value),
};
