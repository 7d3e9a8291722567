import { Injectable } from '@nestjs/common';
import type { Caller } from '../auth/auth.decorators';
import { LlmService } from '../llm/llm.service';
import { LlmMessage, LlmTool } from '../llm/llm.types';
import { MetadataService } from '../metadata/metadata.service';
import { ObjectMeta } from '../metadata/object-metadata.types';
import { toOpenAiTool } from '../tools/tool.define';
import { mayUseObject } from '../tools/tool.middlewares';
import { ToolRegistry } from '../tools/tool.registry';
import { AgentTurn } from './agent-loop.service';
import { AgentSpec } from './agent.types';

/** Where the user is in the UI; each present value becomes one line of the system message. */
export interface ChatContext {
  objectName?: string;
  recordId?: string;
  viewName?: string;
}

/** Caller-chosen model options, already type- and range-checked. */
export interface ChatOptions {
  temperature?: number;
  maxTokens?: number;
  stop?: string | string[];
}

/**
 * Turns an agent spec into what the loop runs: the system message (instructions, the current
 * context and a compact schema of the context object) and the tools the model is offered. Only the
 * agent's declared tools are offered, once each, and only they can execute.
 */
@Injectable()
export class AgentRuntime {
  constructor(
    private readonly llm: LlmService,
    private readonly registry: ToolRegistry,
    private readonly metadata: MetadataService,
  ) {}

  async systemMessage(agent: AgentSpec, context?: ChatContext): Promise<LlmMessage> {
    const lines: string[] = [];
    if (context?.objectName) lines.push(`Current object: ${context.objectName}`);
    if (context?.recordId) lines.push(`Selected record ID: ${context.recordId}`);
    if (context?.viewName) lines.push(`Current view: ${context.viewName}`);
    let content = agent.instructions;
    if (lines.length) {
      content += `\n\n--- Current Context ---\n${lines.join('\n')}`;
      const schema = context?.objectName && mayUseObject(agent.allowedObjects, context.objectName) ? await this.compactSchema(context.objectName) : undefined;
      if (schema) content += `\n${schema}`;
    }
    return { role: 'system', content };
  }

  /** Tools offered to the model: the agent's own, plus client-declared ones (durable chats). */
  agentTools(agent: AgentSpec): LlmTool[] {
    return this.registry.resolve(agent.tools).tools.map((tool) => toOpenAiTool(tool) as LlmTool);
  }

  turn(agent: AgentSpec, caller: Caller, options: ChatOptions, extra: { clientTools?: LlmTool[]; clientToolNames?: string[] } = {}): AgentTurn {
    const clientNames = new Set(extra.clientToolNames ?? []);
    const builtIn = this.registry.resolve(agent.tools).tools.map((t) => t.name).filter((name) => !clientNames.has(name));
    return {
      model: agent.model.model ?? this.llm.defaultModel,
      temperature: options.temperature ?? agent.model.temperature,
      maxTokens: options.maxTokens ?? agent.model.maxTokens,
      stop: options.stop,
      tools: [...this.agentTools(agent), ...(extra.clientTools ?? [])],
      builtInTools: new Set(builtIn),
      clientTools: clientNames,
      maxIterations: agent.planning.maxIterations,
      tokenBudget: agent.guardrails.maxTokensPerInvocation,
      deadline: Date.now() + agent.guardrails.maxExecutionTimeSec * 1000,
      toolContext: {
        caller,
        agent: { name: agent.name, tools: builtIn, allowedObjects: agent.allowedObjects },
      },
    };
  }

  /** One line per field: `amount (currency)`, `stage (select: a | b)`, `account (lookup → account)`. */
  private async compactSchema(objectName: string): Promise<string | undefined> {
    let object: ObjectMeta;
    try {
      object = await this.metadata.getObject(objectName);
    } catch {
      return undefined;
    }
    const fields = object.fields.map((field) => {
      const details = [
        field.type === 'lookup' ? `lookup → ${field.reference}` : field.options ? `${field.type}: ${field.options.join(' | ')}` : field.type,
        field.required && !field.system ? 'required' : undefined,
      ].filter(Boolean);
      return `- ${field.name} (${details.join(', ')})`;
    });
    return `Schema of ${object.name} (${object.label}):\n${fields.join('\n')}`;
  }
}
