import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  type ChatInit,
  type ChatState,
  type ChatStatus,
  type UIMessage,
} from 'ai';

/**
 * The chat state AbstractChat drives, as a plain object that calls `onChange` after every change:
 * what the framework packages' Chat classes do for their own renderers, here for a DOM one.
 */
class ObservableChatState implements ChatState<UIMessage> {
  private currentStatus: ChatStatus = 'ready';
  private currentError: Error | undefined;
  private currentMessages: UIMessage[];

  constructor(
    messages: UIMessage[],
    private readonly onChange: () => void,
  ) {
    this.currentMessages = messages;
  }

  get status(): ChatStatus {
    return this.currentStatus;
  }
  set status(status: ChatStatus) {
    this.currentStatus = status;
    this.onChange();
  }

  get error(): Error | undefined {
    return this.currentError;
  }
  set error(error: Error | undefined) {
    this.currentError = error;
    this.onChange();
  }

  get messages(): UIMessage[] {
    return this.currentMessages;
  }
  set messages(messages: UIMessage[]) {
    this.currentMessages = [...messages];
    this.onChange();
  }

  pushMessage = (message: UIMessage): void => {
    this.currentMessages = [...this.currentMessages, message];
    this.onChange();
  };

  popMessage = (): void => {
    this.currentMessages = this.currentMessages.slice(0, -1);
    this.onChange();
  };

  replaceMessage = (index: number, message: UIMessage): void => {
    this.currentMessages = [
      ...this.currentMessages.slice(0, index),
      this.snapshot(message),
      ...this.currentMessages.slice(index + 1),
    ];
    this.onChange();
  };

  // The stream processor keeps mutating the message it hands over; a copy of it and its parts is what was true now.
  snapshot = <T>(value: T): T => {
    if (typeof value !== 'object' || value === null || !('parts' in value) || !Array.isArray(value.parts)) return value;
    return { ...value, parts: value.parts.map((part: object) => ({ ...part })) };
  };
}

/** AbstractChat with the state above: the AI SDK's own request, streaming and resume logic, no UI framework. */
export class PlaygroundChat extends AbstractChat<UIMessage> {
  constructor({ messages = [], onChange, ...init }: ChatInit<UIMessage> & { onChange: () => void }) {
    super({ ...init, state: new ObservableChatState(messages, onChange) });
  }
}

export interface ChatTarget {
  key: string;
  agent: string;
  /** Durable: the conversation lives on the server under `id`; stateless: the page sends it every turn. */
  durable: boolean;
  id: string;
}

/** Where the transport posts: `…/chats` (durable; its stream at `…/chats/<id>/stream`) or `…/chat` (stateless). */
export function chatApi(agent: string, durable: boolean): string {
  return `/api/v1/ai/agents/${encodeURIComponent(agent)}/${durable ? 'chats' : 'chat'}`;
}

/**
 * A chat on the AI SDK's DefaultChatTransport, the key sent as a Bearer token through its `headers`: `bearer()` at
 * each request, so that a sign-in's access token renewed meanwhile is the one sent (`target.key` by default).
 */
export function createChat(
  target: ChatTarget,
  messages: UIMessage[],
  handlers: { onChange: () => void; onError: (error: Error) => void },
  bearer: () => string = () => target.key,
): PlaygroundChat {
  return new PlaygroundChat({
    id: target.id,
    messages,
    transport: new DefaultChatTransport<UIMessage>({
      api: chatApi(target.agent, target.durable),
      headers: () => ({ Authorization: `Bearer ${bearer()}` }),
      // The stateless route answers JSON unless asked for the UI message stream.
      body: target.durable ? undefined : { stream: true },
    }),
    // A decision on the last write proposal of a step goes straight back (with its token, as the approval's signature).
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onChange: handlers.onChange,
    onError: handlers.onError,
  });
}
