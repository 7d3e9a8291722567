import type { SignedIn } from './sign-in';

/** A sign-in as kept: all but the access token, which is the tab's Bearer (`apiKey`). */
export type SignInGrant = Omit<SignedIn, 'accessToken'>;

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
  signInGrant: 'playground.signIn.grant',
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
  /** How the sign-in's access token is renewed (its refresh token, token endpoint and expiry); none for a pasted key. */
  signInGrant: (): SignInGrant | undefined => {
    const raw = read('signInGrant');
    try {
      return raw ? (JSON.parse(raw) as SignInGrant) : undefined;
    } catch {
      return undefined;
    }
  },
  setSignInGrant: (value: SignInGrant | undefined) => write('signInGrant', value && JSON.stringify(value)),
};
