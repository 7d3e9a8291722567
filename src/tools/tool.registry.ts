import { Injectable, Logger } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { ArgumentValidator, parseArguments, ToolArgumentsCompiler } from './tool.arguments';
import { domainErrorOutcome, errorOutcome, TOOL_NAME_PATTERN } from './tool.define';
import type {
  ToolCall,
  ToolContext,
  ToolDefinition,
  ToolInvocation,
  ToolMiddleware,
  ToolOutcome,
  ToolResult,
  ToolScope,
} from './tool.types';

export const DEFAULT_TOOL_CONCURRENCY = 4;

interface Registered {
  tool: ToolDefinition;
  validate: ArgumentValidator;
}

/**
 * Every tool call the model (or a user) makes goes through here: lookup, argument parsing and
 * JSON-Schema validation, the middleware chain, the tool. `execute` never throws; every failure
 * becomes an error result the model can read and recover from.
 */
@Injectable()
export class ToolRegistry {
  private readonly logger = new Logger(ToolRegistry.name);
  private readonly tools = new Map<string, Registered>();
  private readonly middlewares: ToolMiddleware[] = [];
  private readonly compiler = new ToolArgumentsCompiler();

  /** Adds a tool; a duplicate name or an invalid schema throws (at startup, where it belongs). */
  register<Args>(definition: ToolDefinition<Args>): void {
    if (!TOOL_NAME_PATTERN.test(definition.name)) throw new Error(`Invalid tool name "${definition.name}"`);
    if (this.tools.has(definition.name)) throw new Error(`Tool "${definition.name}" is already registered`);
    const tool = definition as unknown as ToolDefinition;
    this.tools.set(tool.name, { tool, validate: this.compiler.compile(tool.name, tool.parameters) });
  }

  get(name: string): ToolDefinition | undefined {
    return this.tools.get(name)?.tool;
  }

  /** Registered tools in registration order; `scope: 'agent'` (what listings show) hides platform tools. */
  list(options: { scope?: ToolScope } = {}): ToolDefinition[] {
    const all = [...this.tools.values()].map((r) => r.tool);
    return options.scope ? all.filter((t) => t.scope === options.scope) : all;
  }

  /** Resolves an agent's tool names: each known tool once, in the given order, plus the names that are unknown. */
  resolve(names: readonly string[]): { tools: ToolDefinition[]; unknown: string[] } {
    const tools: ToolDefinition[] = [];
    const unknown: string[] = [];
    for (const name of new Set(names)) {
      const tool = this.get(name);
      if (tool) tools.push(tool);
      else unknown.push(name);
    }
    return { tools, unknown };
  }

  /** Appends middlewares; the first one given is the outermost. */
  use(...middlewares: ToolMiddleware[]): this {
    this.middlewares.push(...middlewares);
    return this;
  }

  async execute(call: ToolCall, ctx: ToolContext): Promise<ToolResult> {
    const started = performance.now();
    const outcome = await this.run(call, ctx);
    return {
      toolCallId: call.id,
      name: call.name,
      content: outcome.content,
      isError: outcome.isError,
      durationMs: Math.round((performance.now() - started) * 100) / 100,
    };
  }

  /** Runs one step's calls with at most `concurrency` in flight; results in call order. */
  async executeAll(calls: readonly ToolCall[], ctx: ToolContext, options: { concurrency?: number } = {}): Promise<ToolResult[]> {
    const concurrency = Math.max(1, Math.floor(options.concurrency ?? DEFAULT_TOOL_CONCURRENCY));
    const results = new Array<ToolResult>(calls.length);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < calls.length) {
        const index = next++;
        results[index] = await this.execute(calls[index], ctx);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, calls.length) }, worker));
    return results;
  }

  private async run(call: ToolCall, ctx: ToolContext): Promise<ToolOutcome> {
    try {
      const registered = typeof call.name === 'string' ? this.tools.get(call.name) : undefined;
      if (!registered) return this.unknownTool(call.name, ctx);
      const args = parseArguments(registered.tool.name, call.arguments);
      if (args instanceof DomainError) return domainErrorOutcome(args);
      const invocation: ToolInvocation = { call, tool: registered.tool, args };
      return await this.dispatch(0, invocation, registered, { ...ctx, toolCallId: call.id });
    } catch (error) {
      // Only a faulty middleware gets here; tools' own errors are caught in `core`.
      return this.unexpected(call.name, error);
    }
  }

  private dispatch(index: number, invocation: ToolInvocation, registered: Registered, ctx: ToolContext): Promise<ToolOutcome> {
    const middleware = this.middlewares[index];
    if (!middleware) return this.core(invocation, registered, ctx);
    return middleware(invocation, ctx, (nextCtx) => this.dispatch(index + 1, invocation, registered, nextCtx ?? ctx));
  }

  /** Validation sits innermost so that permission checks and audit see every attempt. */
  private async core(invocation: ToolInvocation, registered: Registered, ctx: ToolContext): Promise<ToolOutcome> {
    const invalid = registered.validate(invocation.args);
    if (invalid) return domainErrorOutcome(invalid);
    try {
      const content = await registered.tool.execute(invocation.args, ctx);
      return { content: content === undefined ? null : content, isError: false };
    } catch (error) {
      if (error instanceof DomainError) return domainErrorOutcome(error);
      return this.unexpected(invocation.tool.name, error);
    }
  }

  private unknownTool(name: unknown, ctx: ToolContext): ToolOutcome {
    const available = ctx.agent
      ? ctx.agent.tools.filter((t) => this.tools.has(t))
      : this.list({ scope: 'agent' }).map((t) => t.name);
    const shown = String(name).slice(0, 100);
    return errorOutcome('tool_not_found', `Unknown tool "${shown}". Available tools: ${available.join(', ') || 'none'}.`, {
      tool: shown,
      availableTools: available,
    });
  }

  private unexpected(name: unknown, error: unknown): ToolOutcome {
    this.logger.error({
      msg: 'tool failed',
      tool: String(name),
      err: error instanceof Error ? { name: error.name, message: error.message, stack: error.stack } : String(error),
    });
    return errorOutcome(
      'tool_failed',
      `Tool "${String(name)}" failed with an internal error. Try again, or answer without this tool.`,
    );
  }
}
