import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { CommitAnnouncer } from '../database/commit-announcer.service';
import { PgPubSub } from '../database/pg-pubsub.service';
import { CANCELLED, ConfirmationStatements } from './mcp-confirmations.repository';
import type { McpSession } from './mcp-sessions';

/**
 * Elicitations one key may have waiting at once, over every replica and session: each holds a tool call
 * (and its HTTP response) open until a person answers or the proposal expires.
 */
export const MAX_WAITING_CONFIRMATIONS_PER_KEY = 5;
/** The NOTIFY type telling the replicas that an answer was stored (payload: the elicitation's request id). */
const ANSWER_EVENT = 'mcp_answer';
/**
 * The JSON-RPC ids of this server's elicitations: unique over every replica and every per-POST SDK server
 * of a session (each of which would number its own requests from 0), and unguessable.
 */
const REQUEST_ID_PREFIX = 'confirm_';

/** The client's JSON-RPC response to an elicitation: its `result`, or its `error`. */
export type ElicitationAnswer = { result: unknown } | { error: unknown };

/** Ends a wait with the answer (undefined: none came). */
type Done = (answer: ElicitationAnswer | undefined) => void;

/**
 * Elicitations waiting for their answer, and the answers, across replicas. A write call registers its
 * elicitation (a row of `mcp_confirmations`, so its key's bound holds everywhere) before sending it; the
 * client's answer arrives as a POST of its own on any replica, which stores it in the row, only for the
 * session that was asked, once. The waiting replica gets it at once when it is the one that received it;
 * otherwise on the NOTIFY that follows, or at the latest on the next poll (EVENTS_POLL_INTERVAL_MS).
 */
@Injectable()
export class McpConfirmations implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(McpConfirmations.name);
  private readonly waiting = new Map<string, Done>();
  private readonly unsubscribes: Array<() => void> = [];
  private closing = false;

  constructor(
    private readonly em: EntityManager,
    private readonly pubsub: PgPubSub,
    private readonly announcer: CommitAnnouncer,
  ) {}

  onModuleInit(): void {
    this.unsubscribes.push(
      this.pubsub.subscribe((event) => {
        if (event.type === ANSWER_EVENT && typeof event.id === 'string' && this.waiting.has(event.id)) void this.read([event.id]);
      }),
      // The poll and a lost LISTEN connection: an answer whose NOTIFY never arrived is read all the same.
      this.announcer.subscribe((signal) => {
        if ((signal.source === 'poll' || signal.source === 'resync') && this.waiting.size)
          void this.read([...this.waiting.keys()]);
      }),
    );
  }

  onApplicationShutdown(): void {
    for (const unsubscribe of this.unsubscribes.splice(0)) unsubscribe();
  }

  /**
   * Sends an elicitation through `send` (given its request id) for the tool call `callId` (its JSON-RPC id)
   * and waits for the session's answer until `expiresAt` or `signal`: undefined when none came (expired,
   * client gone, call cancelled, server stopping). Throws too_many_confirmations, sending nothing, when the key
   * already has its most waiting.
   */
  async ask(
    caller: Caller,
    session: McpSession,
    callId: RequestId,
    expiresAt: Date,
    signal: AbortSignal,
    send: (requestId: string) => Promise<void>,
  ): Promise<ElicitationAnswer | undefined> {
    const requestId = `${REQUEST_ID_PREFIX}${randomUUID()}`;
    const row = { requestId, keyId: caller.keyId, session: session.nonce, callId: JSON.stringify(callId), expiresAt };
    if (!(await ConfirmationStatements.open(this.em.fork(), row, MAX_WAITING_CONFIRMATIONS_PER_KEY))) {
      throw new DomainError(
        'too_many_confirmations',
        `This key already has ${MAX_WAITING_CONFIRMATIONS_PER_KEY} write confirmations waiting for an answer; nothing was proposed. ` +
          'Answer or cancel one first.',
        { limit: MAX_WAITING_CONFIRMATIONS_PER_KEY },
      );
    }
    let release: Done = () => undefined;
    const answered = new Promise<ElicitationAnswer | undefined>((resolve) => {
      const timer = setTimeout(() => release(undefined), Math.max(0, expiresAt.getTime() - Date.now()));
      const abort = () => release(undefined);
      release = (answer) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', abort);
        this.waiting.delete(requestId);
        resolve(answer);
      };
      signal.addEventListener('abort', abort, { once: true });
    });
    // Registered before it is sent: an answer can come back before `send` returns.
    this.waiting.set(requestId, release);
    try {
      if (signal.aborted || this.closing) release(undefined);
      else await send(requestId);
      return await answered;
    } finally {
      release(undefined);
      await ConfirmationStatements.close(this.em.fork(), requestId).catch((error: unknown) =>
        this.logger.warn({ msg: 'could not remove a finished confirmation', error: (error as Error).message }),
      );
    }
  }

  /**
   * Takes the JSON-RPC responses of a POST in `session` (checked to be the caller's): each answers this
   * server's elicitation of that id, if that session's is waiting; any other is ignored.
   */
  async deliver(caller: Caller, session: McpSession, responses: readonly Record<string, unknown>[]): Promise<void> {
    for (const response of responses) {
      const requestId = response.id;
      if (typeof requestId !== 'string' || !requestId.startsWith(REQUEST_ID_PREFIX) || requestId.length > 100) continue;
      const answer: ElicitationAnswer = 'error' in response ? { error: response.error } : { result: response.result };
      const row = { requestId, keyId: caller.keyId, session: session.nonce };
      if (!(await ConfirmationStatements.answer(this.em.fork(), row, answer))) continue;
      const local = this.waiting.get(requestId);
      if (local) local(answer);
      else await this.pubsub.publish({ type: ANSWER_EVENT, id: requestId });
    }
  }

  /**
   * The client cancelled these tool calls of `session` (their JSON-RPC ids, from `notifications/cancelled`): a
   * confirmation one of them waits for ends unanswered, on whichever replica it waits. Any other id is ignored.
   */
  async cancel(caller: Caller, session: McpSession, callIds: readonly RequestId[]): Promise<void> {
    if (!callIds.length) return;
    const row = { keyId: caller.keyId, session: session.nonce };
    const cancelled = await ConfirmationStatements.cancel(
      this.em.fork(),
      row,
      callIds.map((id) => JSON.stringify(id)),
    );
    for (const requestId of cancelled) {
      const local = this.waiting.get(requestId);
      if (local) local(undefined);
      else await this.pubsub.publish({ type: ANSWER_EVENT, id: requestId });
    }
  }

  /** Ends every wait now (answered as none): the calls finish and their responses end before the server closes. */
  releaseAll(): void {
    this.closing = true;
    for (const done of [...this.waiting.values()]) done(undefined);
  }

  /** Reads the stored answers of these waiting elicitations and hands each to its call. */
  private async read(requestIds: string[]): Promise<void> {
    try {
      const answers = await ConfirmationStatements.answers(this.em.fork(), requestIds);
      for (const [requestId, answer] of answers) {
        if (!isPlainObject(answer)) continue;
        this.waiting.get(requestId)?.(answer.cancelled === CANCELLED.cancelled ? undefined : (answer as ElicitationAnswer));
      }
    } catch (error) {
      if (!this.closing) this.logger.warn({ msg: 'could not read confirmation answers', error: (error as Error).message });
    }
  }
}
