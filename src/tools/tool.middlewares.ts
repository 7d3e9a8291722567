import { Logger, type LoggerService } from '@nestjs/common';
import { isPlainObject } from '../common/plain-object';
import type { PrometheusService } from '../observability/prometheus.service';
import { errorOutcome, outcomeErrorCode } from './tool.define';
import { resultRows } from './result-refs';
import type { Caller } from '../auth/caller';
import type { ToolAuditEntry } from '../audit/audit-log.service';
import type { ToolDefinition, ToolMiddleware, ToolOutcome } from './tool.types';

/** 16 KB of JSON: enough for a page of records, small enough to leave the model room to think. */
export const DEFAULT_OUTPUT_CAP_BYTES = 16 * 1024;

/**
 * Per-call timeout. The tool gets a signal of its own, aborted on timeout and whenever the caller's
 * signal aborts; the call then ends with an error result, whether or not the tool honours the signal.
 */
export function timeoutMiddleware(defaultTimeoutMs: number): ToolMiddleware {
  return async (invocation, ctx, next) => {
    const timeoutMs = invocation.tool.timeoutMs ?? defaultTimeoutMs;
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let onParentAbort: (() => void) | undefined;
    const stopped = new Promise<ToolOutcome>((resolve) => {
      timer = setTimeout(() => {
        controller.abort(new Error(`tool timed out after ${timeoutMs} ms`));
        resolve(
          errorOutcome(
            'tool_timeout',
            `Tool "${invocation.tool.name}" did not finish within ${formatMs(timeoutMs)} and was cancelled. ` +
              'Try a narrower request (more filters, fewer fields, a smaller limit).',
            { timeoutMs },
          ),
        );
      }, timeoutMs);
      onParentAbort = () => {
        controller.abort(ctx.signal.reason);
        resolve(errorOutcome('tool_aborted', `Tool "${invocation.tool.name}" was cancelled before it finished.`));
      };
      if (ctx.signal.aborted) onParentAbort();
      else ctx.signal.addEventListener('abort', onParentAbort, { once: true });
    });
    const running = next({ ...ctx, signal: controller.signal });
    // A call that loses the race may still settle later; its outcome is simply dropped.
    running.catch(() => undefined);
    try {
      return await Promise.race([running, stopped]);
    } finally {
      clearTimeout(timer);
      if (onParentAbort) ctx.signal.removeEventListener('abort', onParentAbort);
    }
  };
}

/**
 * A middleware that watches each call without changing it: `report` gets the call's outcome
 * (undefined when an inner middleware threw) and its duration, however the call ended.
 */
function observingMiddleware(
  report: (
    invocation: Parameters<ToolMiddleware>[0],
    ctx: Parameters<ToolMiddleware>[1],
    outcome: ToolOutcome | undefined,
    ms: number,
  ) => void,
): ToolMiddleware {
  return async (invocation, ctx, next) => {
    const started = performance.now();
    let outcome: ToolOutcome | undefined;
    try {
      outcome = await next();
      return outcome;
    } finally {
      report(invocation, ctx, outcome, performance.now() - started);
    }
  };
}

/**
 * One structured log line per call: tool, agent, caller subject, duration and error flag.
 * Never arguments or results: they carry record values.
 */
export function auditMiddleware(logger: LoggerService = new Logger('ToolAudit')): ToolMiddleware {
  return observingMiddleware((invocation, ctx, outcome, ms) => {
    logger.log({
      msg: 'tool call',
      tool: invocation.tool.name,
      toolCallId: invocation.call.id,
      agent: ctx.agent?.name ?? null,
      caller: ctx.caller?.subject ?? null,
      durationMs: Math.round(ms),
      isError: outcome ? outcome.isError : true,
      errorCode: outcome ? (outcomeErrorCode(outcome) ?? null) : 'middleware_failed',
    });
  });
}

/**
 * The audit trail of tool calls: one entry per call, however it ended, with the caller, agent and
 * chat, the arguments without values of fields the caller may not see, the rows returned and the
 * outcome. `record` queues the entry (the audit log writes it in batches), so the call waits for no
 * database round trip of its own.
 */
export function auditTrailMiddleware(
  record: (entry: ToolAuditEntry) => void,
  hiddenFields: (caller: Caller, objectName: string) => Promise<readonly string[]>,
): ToolMiddleware {
  return async (invocation, ctx, next) => {
    const at = new Date();
    const started = performance.now();
    let outcome: ToolOutcome | undefined;
    try {
      outcome = await next();
      return outcome;
    } finally {
      const durationMs = performance.now() - started;
      const objectName = invocation.args.objectName;
      const hidden =
        ctx.caller && typeof objectName === 'string' ? await hiddenFields(ctx.caller, objectName).catch(() => null) : [];
      record({
        at,
        keyId: ctx.caller?.keyId,
        agent: ctx.agent?.name,
        chatId: ctx.chatId,
        toolCallId: invocation.call.id,
        tool: invocation.tool.name,
        // Could not tell which fields are hidden: keep no argument rather than risk a hidden value.
        arguments: hidden === null ? null : withoutKeys(invocation.args, new Set(hidden)),
        rowCount: outcome && !outcome.isError ? rowCountOf(invocation.tool, outcome.content) : null,
        durationMs,
        outcome: outcome ? (outcome.isError ? (outcomeErrorCode(outcome) ?? 'error') : 'ok') : 'middleware_failed',
      });
    }
  };
}

/** A JSON value with every property named in `keys` removed at any depth (record values, where conditions). */
export function withoutKeys(value: unknown, keys: ReadonlySet<string>): unknown {
  if (!keys.size) return value;
  if (Array.isArray(value)) return value.map((item) => withoutKeys(item, keys));
  if (!isPlainObject(value)) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => !keys.has(key))
      .map(([key, item]) => [key, withoutKeys(item, keys)]),
  );
}

/** Records or rows a tool that declares rows answered with; null when its result has none. */
function rowCountOf(tool: ToolDefinition, content: unknown): number | null {
  if (tool.holds !== 'rows' || !isPlainObject(content)) return null;
  return resultRows(content).length;
}

/**
 * Counts each call in the metrics by tool and outcome (`ok` or the result's error code), with its
 * duration. Outermost, like audit, so refused and timed-out calls count too.
 */
export function prometheusMiddleware(metrics: Pick<PrometheusService, 'observeToolCall'>): ToolMiddleware {
  return observingMiddleware((invocation, _ctx, outcome, ms) => {
    const code = outcome ? (outcome.isError ? (outcomeErrorCode(outcome) ?? 'error') : 'ok') : 'error';
    metrics.observeToolCall(invocation.tool.name, code, ms / 1000);
  });
}

/**
 * When a call runs on behalf of an agent: only the agent's tools, and only its allowed objects
 * (through any `objectName` argument). Direct calls by a user (no agent) are not restricted here.
 */
export function permissionMiddleware(): ToolMiddleware {
  return async (invocation, ctx, next) => {
    const agent = ctx.agent;
    if (!agent) return next();
    if (!agent.tools.includes(invocation.tool.name)) {
      return errorOutcome('tool_not_allowed', `Agent "${agent.name}" may not use tool "${invocation.tool.name}".`, {
        tool: invocation.tool.name,
        allowedTools: agent.tools,
      });
    }
    const objectName = invocation.args.objectName;
    if (typeof objectName === 'string' && !mayUseObject(agent.allowedObjects, objectName)) {
      return errorOutcome(
        'object_not_allowed',
        `Agent "${agent.name}" may not access object "${objectName.slice(0, 100)}". Allowed objects: ${agent.allowedObjects.join(', ') || 'none'}.`,
        { object: objectName.slice(0, 100), allowedObjects: agent.allowedObjects },
      );
    }
    return next();
  };
}

export function mayUseObject(allowedObjects: readonly string[], objectName: string): boolean {
  return allowedObjects.includes('*') || allowedObjects.includes(objectName);
}

/**
 * For tools that declare `rateLimit`: at most `perMinute` calls per caller owner (Caller) and tool in any
 * sliding minute. In memory, so per replica; good enough to stop a runaway loop.
 */
export function rateLimitMiddleware(now: () => number = Date.now): ToolMiddleware {
  const windows = new Map<string, number[]>();
  return async (invocation, ctx, next) => {
    const limit = invocation.tool.rateLimit?.perMinute;
    if (!limit) return next();
    const key = `${ctx.caller?.owner ?? 'anonymous'}\u0000${invocation.tool.name}`;
    const at = now();
    const recent = (windows.get(key) ?? []).filter((t) => t > at - 60_000);
    if (recent.length >= limit) {
      windows.set(key, recent);
      const retryAfterMs = recent[0] + 60_000 - at;
      return errorOutcome(
        'rate_limited',
        `Tool "${invocation.tool.name}" may be called at most ${limit} times per minute; try again in ${Math.ceil(retryAfterMs / 1000)} s.`,
        { perMinute: limit, retryAfterMs },
      );
    }
    recent.push(at);
    windows.set(key, recent);
    return next();
  };
}

/**
 * Replaces output larger than `maxBytes` of JSON with a smaller, still valid, version (see capContent): what
 * the model reads. A write proposal is left whole: a person approves exactly what it holds and its token is
 * signed over all of it, and the model never reads it (it reads what came of the decision). A write tool's
 * error is the model's to read, and is capped like any other.
 */
export function outputCapMiddleware(maxBytes: number = DEFAULT_OUTPUT_CAP_BYTES): ToolMiddleware {
  return async (invocation, _ctx, next) => {
    const outcome = await next();
    if (invocation.tool.holds === 'proposal' && !outcome.isError) return outcome;
    return { ...outcome, content: capContent(outcome.content, maxBytes) };
  };
}

/** The array property worth shortening: the usual list keys first, else the largest array. */
const LIST_KEYS = ['records', 'rows', 'objects', 'fields'];

/**
 * Content whose JSON exceeds `maxBytes`: for an object with a list (records, rows, ...) the list is
 * cut until the whole fits, with `truncated`, `omittedCount` and a note; otherwise a `preview`
 * string of the JSON and a note. Both always serialise to valid JSON within the cap.
 */
export function capContent(content: unknown, maxBytes: number): unknown {
  if (size(content) <= maxBytes) return content;
  if (isPlainObject(content)) {
    const key = LIST_KEYS.find((k) => Array.isArray(content[k])) ?? largestArrayKey(content);
    if (key) {
      const list = content[key] as unknown[];
      const build = (kept: number): Record<string, unknown> => {
        const shortened: Record<string, unknown> = { ...content, [key]: list.slice(0, kept) };
        if (typeof content.count === 'number') shortened.count = kept;
        if (typeof content.hasMore === 'boolean') shortened.hasMore = true;
        shortened.truncated = true;
        shortened.omittedCount = list.length - kept;
        shortened.note =
          `Output exceeded the ${formatBytes(maxBytes)} limit: ${list.length - kept} of ${list.length} ${key} were left out. ` +
          'Narrow the query: add filters, request fewer fields, use a smaller limit, or page with offset.';
        return shortened;
      };
      if (size(build(0)) <= maxBytes) return build(largestFitting(list.length, build, maxBytes));
    }
  }
  return preview(content, maxBytes);
}

function preview(content: unknown, maxBytes: number): unknown {
  const json = JSON.stringify(content);
  const build = (length: number) => ({
    truncated: true,
    note:
      `Output exceeded the ${formatBytes(maxBytes)} limit and was cut off; "preview" holds the beginning of the JSON. ` +
      'Narrow the request to get complete data.',
    preview: json.slice(0, length),
  });
  return build(largestFitting(json.length, build, maxBytes));
}

/**
 * The largest n in [0, max] whose `build(n)` serialises within `maxBytes` (a binary search: the size
 * grows with n). build(0) is taken to fit.
 */
function largestFitting(max: number, build: (n: number) => unknown, maxBytes: number): number {
  let low = 0;
  let high = max;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (size(build(mid)) <= maxBytes) low = mid;
    else high = mid - 1;
  }
  return low;
}

function largestArrayKey(content: Record<string, unknown>): string | undefined {
  let best: string | undefined;
  let bestSize = -1;
  for (const [key, value] of Object.entries(content)) {
    if (!Array.isArray(value)) continue;
    const s = size(value);
    if (s > bestSize) [best, bestSize] = [key, s];
  }
  return best;
}

function size(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? 'null', 'utf8');
}

function formatBytes(bytes: number): string {
  return bytes % 1024 === 0 ? `${bytes / 1024} KB` : `${bytes} bytes`;
}

function formatMs(ms: number): string {
  return ms >= 1000 && ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}
