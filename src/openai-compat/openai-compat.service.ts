import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { AgentService } from '../agents/agent.service';
import type { Caller } from '../auth/caller';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { AgentLoop } from '../runtime/agent-loop.service';
import { AgentRuntime, PreparedTurn } from '../runtime/agent-runtime.service';
import { toLlmMessages } from '../runtime/conversation';
import { streamTurn } from '../runtime/streamed-turn';
import { ChatCompletionStreamWriter } from './chat-completion-stream.writer';
import { CompletionHead, STEP_SEPARATOR, stepText, toCompletion } from './chat-completion.mapper';
import { CompletionRequest, FUNCTION_TOOL_LABELS, parseCompletionRequest } from './chat-completion.request';
import { ChatCompletionResponse, ModelListResponse, ModelResponse, toModelResponse } from './openai-compat.dto';
import { openAiErrorOf } from './openai-errors';
import { answeredApprovals, withOutcomes, type AnsweredApproval } from './approval-calls';
import { DomainError } from '../common/domain-error';
import type { ConversationMessage } from '../runtime/conversation';
import { ApprovedWrites, type WriteOutcome } from '../writes/approved-writes.service';

/**
 * Agents as OpenAI models: the Chat Completions wire format turned into one prepareTurn call and
 * the loop's hooks turned back into a completion or a chunk stream. Nothing else happens here.
 */
@Injectable()
export class OpenAiCompatService {
  private readonly logger = new Logger(OpenAiCompatService.name);

  constructor(
    private readonly agents: AgentService,
    private readonly runtime: AgentRuntime,
    private readonly loop: AgentLoop,
    private readonly writes: ApprovedWrites,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async listModels(caller: Caller): Promise<ModelListResponse> {
    return { object: 'list', data: (await this.agents.listUsable(caller)).map(toModelResponse) };
  }

  async getModel(caller: Caller, id: string): Promise<ModelResponse> {
    return toModelResponse(await this.agents.getUsable(id, caller));
  }

  /**
   * One turn: the completion, or the chunk stream written to the raw response that `open` hands over
   * (only after every check, so that refusals are still plain HTTP errors).
   */
  async complete(
    caller: Caller,
    body: unknown,
    request: { id: string; signal: AbortSignal },
    open: () => ServerResponse,
  ): Promise<ChatCompletionResponse | undefined> {
    const completion = parseCompletionRequest(body);
    const prepared = await this.prepare(caller, completion);
    const head: CompletionHead = {
      id: `chatcmpl-${randomUUID()}`,
      created: Math.floor(Date.now() / 1000),
      model: completion.model,
    };
    if (!completion.stream) {
      const texts: string[] = [];
      const result = await this.loop.runTurn(
        prepared.turn,
        prepared.messages,
        {
          onStep: (step) => {
            // An answer sent back for correction (grounding retry) is replaced by the next one.
            const text = step.superseded ? '' : stepText(step);
            if (text) texts.push(text);
            return Promise.resolve();
          },
        },
        request.signal,
      );
      return toCompletion(head, texts.join(STEP_SEPARATOR), result);
    }
    const writer = new ChatCompletionStreamWriter(open(), this.config.sseKeepAliveMs, head, completion.includeUsage);
    await streamTurn(this.loop, prepared, writer, request.signal, {
      logger: this.logger,
      msg: 'streamed completion failed',
      failure: (error) => openAiErrorOf(error, request.id),
    });
    return undefined;
  }

  private async prepare(caller: Caller, completion: CompletionRequest): Promise<PreparedTurn> {
    const request = {
      caller,
      agentName: completion.model,
      approvalScope: approvalScopeOf(caller),
      instructions: completion.instructions,
      options: completion.options,
      optionNames: completion.optionNames,
      declaredTools: completion.tools ? { tools: completion.tools, labels: FUNCTION_TOOL_LABELS } : undefined,
      toolChoice: completion.toolChoice,
    };
    const conversation = await this.settleApprovals(caller, completion, () => this.runtime.admit(request));
    return this.runtime.prepareTurn({ ...request, history: toLlmMessages(conversation) });
  }

  /**
   * The history's answered write proposals (approve_write calls), each settled once: a decision not yet taken
   * is taken now (the write, as this key, under If-Match); one taken by this key before (its client sends the
   * whole conversation with every request) shows what it came to, and writes nothing again. The model then
   * reads its write calls and their outcomes.
   *
   * Only a turn that may run decides anything (`admit`: the key, the agent, the request's tools, the model
   * endpoint, the token quota): the client learns what came of a decision only from the answer to this
   * request, so a request refused afterwards (429 at the quota) must not have written anything. Refused, it
   * writes nothing and its tokens stay good: the same answer sent again later decides then.
   */
  private async settleApprovals(
    caller: Caller,
    completion: CompletionRequest,
    admit: () => Promise<unknown>,
  ): Promise<ConversationMessage[]> {
    const approvals = answeredApprovals(completion.conversation, approvalScopeOf(caller), completion.model);
    if (!approvals.length) return completion.conversation;
    await admit();
    const settled = [];
    for (const approval of approvals) settled.push({ approval, outcome: await this.settleOnce(caller, approval) });
    return withOutcomes(completion.conversation, settled);
  }

  private async settleOnce(caller: Caller, { ref, answer }: AnsweredApproval): Promise<WriteOutcome> {
    // A token is checked against the proposal before anything recorded under it is shown.
    this.writes.verify(ref, answer.token);
    const recorded = await this.writes.spentOutcome(caller, answer.token);
    if (recorded) return recorded;
    try {
      return await this.writes.decide(caller, ref, answer.decision, answer.token, answer.reason);
    } catch (error) {
      // The same answer sent twice at once: the other request spent the token; show what it came to.
      const raced = error instanceof DomainError && error.code === 'approval_invalid';
      const outcome = raced ? await this.writes.spentOutcome(caller, answer.token) : undefined;
      if (outcome) return outcome;
      throw error;
    }
  }
}

/**
 * What the approval tokens of this API bind: the key. It keeps no conversation, so a proposal is approved by
 * the key that was shown it, which must itself be allowed to make the write.
 */
function approvalScopeOf(caller: Caller): string {
  return `openai:${caller.keyId}`;
}
