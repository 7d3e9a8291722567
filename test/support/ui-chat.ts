import { Chat } from '@ai-sdk/react';
import { DefaultChatTransport, type ChatInit, type UIMessage } from 'ai';
import { bearer } from './test-app';

export interface UiChatOptions extends Omit<ChatInit<UIMessage>, 'transport'> {
  /** Extra body fields the transport sends with every request (as `useChat`'s `body`). */
  body?: Record<string, unknown>;
}

/**
 * The AI SDK's own `Chat` (what `useChat` wraps) with a stock `DefaultChatTransport`: the only
 * things set are what a page sets, the URL and the Authorization header.
 */
export function uiChat(baseUrl: string, api: string, key: string, options: UiChatOptions = {}): Chat<UIMessage> {
  const { body, ...init } = options;
  return new Chat<UIMessage>({
    ...init,
    transport: new DefaultChatTransport<UIMessage>({ api: `${baseUrl}${api}`, headers: bearer(key), body }),
  });
}

/** The text of a UI message, its text parts joined. */
export function textOf(message: UIMessage | undefined): string {
  return (message?.parts ?? []).map((part) => (part.type === 'text' ? part.text : '')).join('');
}

/** Polls `condition` until it holds (fails after `timeoutMs`, saying what was awaited: `what`, or what it gives then). */
export async function waitUntil(condition: () => boolean, what: string | (() => string), timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
