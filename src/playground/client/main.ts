import './no-eval';
import type { UIMessage } from 'ai';
import { ApiError, apiErrorFromText, apiGet, apiPath, apiSend, type AgentSummary, type ObjectSummary } from './api';
import { createChat, type ChatTarget, type PlaygroundChat } from './chat';
import { ChatView } from './chat-view';
import { byId, randomId, showError } from './dom';
import { GridView } from './grid-view';
import { revertChangeSet } from './history-api';
import type { ReceiptReplay, ReceiptReplayer } from './receipt-view';
import { session, type SignInGrant } from './session';
import {
  completeSignIn,
  issuerHost,
  refreshSignIn,
  renewalAt,
  signInSettings,
  startSignIn,
  type SignedIn,
  type SignInSettings,
} from './sign-in';

const EMPTY_CHAT = 'Ask a question about your data; the tools the agent calls appear as cards you can open.';

const el = {
  keyForm: byId('key-form', HTMLFormElement),
  keyInput: byId('api-key', HTMLInputElement),
  forgetKey: byId('forget-key', HTMLButtonElement),
  signIn: byId('sign-in', HTMLButtonElement),
  signOut: byId('sign-out', HTMLButtonElement),
  keyStatus: byId('key-status', HTMLElement),
  agent: byId('agent', HTMLSelectElement),
  durable: byId('durable', HTMLInputElement),
  newChat: byId('new-chat', HTMLButtonElement),
  messages: byId('messages', HTMLElement),
  chatStatus: byId('chat-status', HTMLElement),
  chatError: byId('chat-error', HTMLElement),
  askForm: byId('ask-form', HTMLFormElement),
  question: byId('question', HTMLTextAreaElement),
  send: byId('send', HTMLButtonElement),
  stop: byId('stop', HTMLButtonElement),
};

/** Re-run of a receipt: the stored call run again on the server, in the durable chat open now (a stateless one has none). */
function receiptReplayer(): ReceiptReplayer {
  const opened = target;
  if (!opened?.durable) return undefined;
  const path = apiPath('ai', 'agents', opened.agent, 'chats', opened.id, 'receipts', 'replay');
  return async (toolCallId) =>
    (await apiSend<ReceiptReplay>(session.apiKey() ?? opened.key, path, { method: 'POST', body: { toolCallId } })).body;
}

const view = new ChatView(
  el.messages,
  ({ approvalId, approved, reason }) => {
    Promise.resolve(chat?.addToolApprovalResponse({ id: approvalId, approved, reason })).catch((error: unknown) =>
      showError(el.chatError, error),
    );
  },
  receiptReplayer,
  async (changeSetId) => {
    const key = session.apiKey();
    if (!key) throw new Error('Enter an API key first');
    await revertChangeSet(key, changeSetId);
    records.refresh();
  },
);
const records = new GridView(
  {
    form: byId('records-form', HTMLFormElement),
    object: byId('object', HTMLSelectElement),
    view: byId('view', HTMLSelectElement),
    search: byId('search', HTMLInputElement),
    where: byId('where', HTMLTextAreaElement),
    error: byId('records-error', HTMLElement),
    conflict: byId('grid-conflict', HTMLElement),
    status: byId('grid-status', HTMLElement),
    table: byId('grid', HTMLTableElement),
    caption: byId('grid-caption', HTMLElement),
    prev: byId('prev', HTMLButtonElement),
    next: byId('next', HTMLButtonElement),
    pageInfo: byId('page-info', HTMLElement),
    feed: byId('feed-status', HTMLElement),
    panel: byId('records', HTMLElement),
    historyButton: byId('record-history', HTMLButtonElement),
    deleteButton: byId('record-delete', HTMLButtonElement),
    undoButton: byId('undo', HTMLButtonElement),
    trashButton: byId('trash-open', HTMLButtonElement),
    selected: byId('selected-record', HTMLElement),
    undoConflict: byId('undo-conflict', HTMLElement),
    history: {
      panel: byId('history-panel', HTMLElement),
      title: byId('history-title', HTMLElement),
      error: byId('history-error', HTMLElement),
      list: byId('history-list', HTMLOListElement),
      more: byId('history-more', HTMLButtonElement),
      close: byId('history-close', HTMLButtonElement),
    },
    trash: {
      panel: byId('trash-panel', HTMLElement),
      error: byId('trash-error', HTMLElement),
      list: byId('trash-list', HTMLUListElement),
      empty: byId('trash-empty', HTMLElement),
      more: byId('trash-more', HTMLButtonElement),
      close: byId('trash-close', HTMLButtonElement),
    },
  },
  () => session.apiKey(),
);

let chat: PlaygroundChat | undefined;
/** Where the open chat lives: its key, agent, mode and id. */
let target: ChatTarget | undefined;
/** Why the server refused the last approval or rejection, shown while the chat reloaded after it is open. */
let refusedDecision: Error | undefined;
let renderScheduled = false;
/** Bumped by every openChat, so that a slower earlier one (a restore still loading) gives way. */
let openings = 0;

/** The failure of a chat request as the API worded it (`{ error, code }` of a 4xx), or the stream's error text. */
function chatFailure(error: Error): Error {
  const { statusCode, responseBody } = error as Error & { statusCode?: unknown; responseBody?: unknown };
  if (typeof statusCode === 'number' && typeof responseBody === 'string') return apiErrorFromText(statusCode, responseBody);
  return error;
}

const STATUS_TEXT = { submitted: 'Waiting for the agent…', streaming: 'The agent is answering…', ready: '', error: '' };

function render(): void {
  renderScheduled = false;
  const busy = chat?.status === 'submitted' || chat?.status === 'streaming';
  if (chat) view.render(chat.messages);
  el.chatStatus.textContent = chat ? STATUS_TEXT[chat.status] : '';
  showError(el.chatError, chat?.error ? chatFailure(chat.error) : refusedDecision);
  el.send.disabled = !chat || busy;
  el.stop.hidden = !busy;
  // Screen readers announce the answer once it is complete, not every streamed word.
  el.messages.setAttribute('aria-busy', String(busy));
}

/** Streamed deltas arrive faster than frames: one render per frame. */
function scheduleRender(): void {
  if (renderScheduled) return;
  renderScheduled = true;
  requestAnimationFrame(render);
}

/** Previous messages of a durable chat; an unknown chat (deleted, other key) starts afresh. */
async function storedMessages(key: string, agent: string, id: string): Promise<UIMessage[] | undefined> {
  try {
    const body = await apiGet<{ messages: UIMessage[] }>(key, apiPath('ai', 'agents', agent, 'chats', id, 'messages'));
    return body.messages;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return undefined;
    throw error;
  }
}

/**
 * Opens the chat for the selected agent and mode. With `restore`, a durable chat kept in this tab
 * comes back: its messages from the server, then the running turn's stream, if one is running.
 * `refusal`: why it is opened again, shown until the next question.
 */
async function openChat(restore: boolean, refusal?: Error): Promise<void> {
  const opening = ++openings;
  refusedDecision = refusal;
  const previous = chat;
  chat = undefined;
  target = undefined;
  await previous?.stop();
  const key = session.apiKey();
  const agent = el.agent.value;
  if (!key || !agent) {
    view.clear(EMPTY_CHAT);
    render();
    return;
  }
  const durable = el.durable.checked;
  session.setAgent(agent);
  session.setDurable(durable);
  let id = randomId();
  let messages: UIMessage[] = [];
  const storedId = session.chatId();
  if (durable && restore && storedId) {
    try {
      const stored = await storedMessages(key, agent, storedId);
      if (stored) [id, messages] = [storedId, stored];
    } catch (error) {
      showError(el.chatError, error);
    }
    if (opening !== openings) return;
  }
  session.setChatId(durable ? id : undefined);
  target = { key, agent, durable, id };
  const opened = createChat(
    target,
    messages,
    {
      onChange: scheduleRender,
      onError: (error) => {
        scheduleRender();
        const failure = chatFailure(error);
        // A refused decision (its proposal expired, or this key may not make the write): fetched again, the chat
        // shows what became of the proposal (an expired one was answered for the model, whose turn goes on) or
        // asks again, with the refusal on screen.
        if (failure instanceof ApiError && failure.code === 'approval_invalid') void openChat(true, failure);
      },
    },
    // A sign-in's token renewed since the chat opened is the one its next request sends.
    () => session.apiKey() ?? key,
  );
  chat = opened;
  view.clear(EMPTY_CHAT);
  render();
  // The server answers 204 when no turn is running; otherwise its stream from the turn's start.
  if (durable && id === storedId) {
    await opened.resumeStream();
    if (opening !== openings || opened.status !== 'ready') return;
    // A turn that ended between the fetch and the resume (as one that goes on at once after a refused decision
    // can) streamed nothing here: fetched again, the conversation has it.
    const now = await storedMessages(key, agent, id).catch(() => undefined);
    if (now && opening === openings && isFurther(now, opened.messages)) opened.messages = now;
  }
}

/** Whether conversation `a` got further than `b`: more messages, or more parts in the last one. */
function isFurther(a: UIMessage[], b: UIMessage[]): boolean {
  if (a.length !== b.length) return a.length > b.length;
  return (a.at(-1)?.parts.length ?? 0) > (b.at(-1)?.parts.length ?? 0);
}

async function connect(key: string): Promise<void> {
  el.keyStatus.textContent = 'Checking the key…';
  let agents: AgentSummary[];
  let objects: ObjectSummary[];
  try {
    [{ agents }, { objects }] = await Promise.all([
      apiGet<{ agents: AgentSummary[] }>(key, apiPath('ai', 'agents')),
      apiGet<{ objects: ObjectSummary[] }>(key, apiPath('objects')),
    ]);
  } catch (error) {
    el.keyStatus.textContent = '';
    showError(el.chatError, error);
    if (error instanceof ApiError && error.status === 401) forget();
    return;
  }
  const signedIn = session.signedIn();
  el.keyStatus.textContent = signedIn ? `Signed in with ${signedIn}.` : `Using the key ending in …${key.slice(-4)}.`;
  el.signOut.hidden = !signedIn;
  scheduleRenewal();
  showError(el.chatError, undefined);
  const usable = agents.filter((agent) => agent.active);
  el.agent.replaceChildren(
    ...usable.map((agent) => new Option(agent.label ? `${agent.label} (${agent.name})` : agent.name, agent.name)),
  );
  el.agent.disabled = usable.length === 0;
  const preferred = [session.agent(), 'data_chat'].find((name) => usable.some((agent) => agent.name === name));
  if (preferred) el.agent.value = preferred;
  await Promise.all([openChat(true), records.start(objects)]);
}

function forget(): void {
  clearTimeout(renewal);
  session.setApiKey(undefined);
  session.setSignedIn(undefined);
  session.setSignInGrant(undefined);
  el.signOut.hidden = true;
  session.setChatId(undefined);
  void chat?.stop();
  chat = undefined;
  target = undefined;
  el.agent.replaceChildren();
  el.agent.disabled = true;
  el.keyStatus.textContent = 'No key in use.';
  records.reset();
  view.clear(EMPTY_CHAT);
  render();
}

el.keyForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const key = el.keyInput.value.trim();
  if (!key) return;
  session.setApiKey(key);
  session.setSignedIn(undefined);
  session.setSignInGrant(undefined);
  // A new key is another caller: its chats are not the previous key's.
  session.setChatId(undefined);
  el.keyInput.value = '';
  void connect(key);
});

el.forgetKey.addEventListener('click', forget);
el.agent.addEventListener('change', () => void openChat(false));
el.durable.addEventListener('change', () => void openChat(false));
el.newChat.addEventListener('click', () => void openChat(false));
el.stop.addEventListener('click', () => void chat?.stop());

el.askForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const text = el.question.value.trim();
  if (!text || !chat || el.send.disabled) return;
  el.question.value = '';
  refusedDecision = undefined;
  void chat.sendMessage({ text });
});

el.question.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    el.askForm.requestSubmit();
  }
});

let signIn: SignInSettings = { enabled: false };
/** The server's sign-in settings, asked for once as the page loads. */
const signInLoaded = signInSettings();
/** The timer that renews the sign-in's access token before it expires. */
let renewal: ReturnType<typeof setTimeout> | undefined;

/** Keeps the tab's sign-in: its token and what renews it. */
function keepSignIn(signedIn: SignedIn): void {
  const { accessToken, ...grant } = signedIn;
  session.setApiKey(accessToken);
  session.setSignInGrant(grant);
}

/**
 * Renews the sign-in's access token before it expires: with its refresh token when the provider gave one;
 * otherwise (or when the provider refuses) the person is asked to sign in again, and signed out once it expired.
 */
function scheduleRenewal(): void {
  clearTimeout(renewal);
  const grant = session.signInGrant();
  const at = grant && session.signedIn() ? renewalAt(grant) : undefined;
  if (!grant || at === undefined) return;
  renewal = setTimeout(() => void renew(grant), Math.max(0, at - Date.now()));
}

async function renew(grant: SignInGrant): Promise<void> {
  const token = session.apiKey();
  const settings = await signInLoaded;
  if (!token || !settings.enabled) return;
  if (grant.refreshToken) {
    try {
      const next = await refreshSignIn(settings, { ...grant, accessToken: token });
      // Signed out, or signed in anew, meanwhile: that wins.
      if (session.apiKey() !== token) return;
      keepSignIn(next);
      scheduleRenewal();
      return;
    } catch (error) {
      showError(el.chatError, error);
    }
  }
  const host = session.signedIn() ?? issuerHost(settings);
  el.keyStatus.textContent = `Your sign-in with ${host} is about to expire: sign in again to go on.`;
  el.signIn.hidden = false;
  const expiresAt = grant.expiresAt ?? Date.now();
  renewal = setTimeout(
    () => {
      if (session.apiKey() !== token) return;
      forget();
      showError(el.chatError, new Error(`Your sign-in with ${host} expired: sign in again.`));
    },
    Math.max(0, expiresAt - Date.now()),
  );
}

el.signIn.addEventListener('click', () => {
  el.signIn.disabled = true;
  startSignIn(signIn).catch((error: unknown) => {
    el.signIn.disabled = false;
    showError(el.chatError, error);
  });
});
el.signOut.addEventListener('click', forget);

/** Connects with the key or access token this tab holds, if any. */
function resume(): void {
  const storedKey = session.apiKey();
  if (storedKey) void connect(storedKey);
  else render();
}

/** The sign-in button when the server has sign-in on; back from the provider, the code becomes this tab's Bearer. */
async function start(): Promise<void> {
  const returning = new URLSearchParams(location.search).has('state');
  // A plain load does not wait for the sign-in settings.
  if (!returning) resume();
  signIn = await signInLoaded;
  if (signIn.enabled) {
    el.signIn.textContent = `Sign in with ${issuerHost(signIn)}`;
    el.signIn.hidden = false;
  }
  if (!returning) return;
  try {
    const signedIn = await completeSignIn(signIn);
    if (signedIn) {
      keepSignIn(signedIn);
      session.setSignedIn(issuerHost(signIn));
      // Another caller: the previous key's chat is not this user's.
      session.setChatId(undefined);
    }
  } catch (error) {
    showError(el.chatError, error);
  }
  resume();
}

el.durable.checked = session.durable();
void start();
