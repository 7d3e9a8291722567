import type { Logger } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import type { AgentLoop, TurnHooks, TurnResult } from './agent-loop.service';
import type { PreparedTurn } from './agent-runtime.service';

/** A front door's stream of one turn: the loop's hooks write it, then its end or its failure. */
export interface TurnStreamWriter<Failure> {
  hooks(): TurnHooks;
  finish(result: TurnResult): void;
  fail(failure: Failure): void;
}

/**
 * Streams a turn through `writer`. A failure after the first byte is written into the stream as
 * `failure(error)` says, never a silent stall; an unexpected one (not a DomainError) is logged first.
 */
export async function streamTurn<Failure>(
  loop: AgentLoop,
  prepared: PreparedTurn,
  writer: TurnStreamWriter<Failure>,
  signal: AbortSignal,
  onFailure: { logger: Logger; msg: string; failure(error: unknown): Failure },
): Promise<void> {
  try {
    writer.finish(await loop.runTurn(prepared.turn, prepared.messages, writer.hooks(), signal));
  } catch (error) {
    if (!(error instanceof DomainError)) onFailure.logger.error({ msg: onFailure.msg, err: error });
    writer.fail(onFailure.failure(error));
  }
}
