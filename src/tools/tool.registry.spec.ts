import { Logger } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { defineTool, toOpenAiTool } from './tool.define';
import {
  auditMiddleware,
  prometheusMiddleware,
  capContent,
  outputCapMiddleware,
  permissionMiddleware,
  rateLimitMiddleware,
  timeoutMiddleware,
} from './tool.middlewares';
import { ToolRegistry } from './tool.registry';
import type { ToolContext, ToolDefinition, ToolErrorContent, ToolMiddleware } from './tool.types';

const ctx = (extra: Partial<ToolContext> = {}): ToolContext => ({ signal: new AbortController().signal, ...extra });

function echoTool(overrides: Partial<ToolDefinition> = {}): ToolDefinition {
  return defineTool<Record<string, unknown>>({
    name: 'echo',
    description: 'Echoes its arguments.',
    parameters: {
      type: 'object',
      properties: {
        objectName: { type: 'string' },
        count: { type: 'integer', minimum: 1 },
        mode: { type: 'string', enum: ['a', 'b'] },
      },
      required: ['objectName'],
      additionalProperties: false,
    },
    scope: 'agent',
    execute: (args) => Promise.resolve({ echoed: args }),
    ...overrides,
  });
}

function errorOf<D = unknown>(content: unknown): ToolErrorContent['error'] & { details: D } {
  return (content as { error: ToolErrorContent['error'] & { details: D } }).error;
}

describe('ToolRegistry', () => {
  it('refuses a duplicate tool name at registration', () => {
    const registry = new ToolRegistry();
    registry.register(echoTool());
    expect(() => registry.register(echoTool())).toThrow(/already registered/);
  });

  it('lists agent tools and hides platform tools, which stay callable by name', async () => {
    const registry = new ToolRegistry();
    registry.register(echoTool());
    registry.register(echoTool({ name: 'hidden', scope: 'platform' }));
    expect(registry.list({ scope: 'agent' }).map((t) => t.name)).toEqual(['echo']);
    expect(registry.list().map((t) => t.name)).toEqual(['echo', 'hidden']);
    const result = await registry.execute({ id: 'c1', name: 'hidden', arguments: { objectName: 'x' } }, ctx());
    expect(result.isError).toBe(false);
  });

  it('resolves names once each and reports unknown ones', () => {
    const registry = new ToolRegistry();
    registry.register(echoTool());
    const { tools, unknown } = registry.resolve(['echo', 'nope', 'echo']);
    expect(tools.map((t) => t.name)).toEqual(['echo']);
    expect(unknown).toEqual(['nope']);
  });

  it('builds the OpenAI function-tool shape', () => {
    const tool = echoTool();
    expect(toOpenAiTool(tool)).toEqual({
      type: 'function',
      function: { name: 'echo', description: 'Echoes its arguments.', parameters: tool.parameters },
    });
  });

  it('answers an unknown tool with a readable error result listing the available tools', async () => {
    const registry = new ToolRegistry();
    registry.register(echoTool());
    const result = await registry.execute({ id: 'c1', name: 'drop_everything', arguments: '{}' }, ctx());
    expect(result).toMatchObject({ toolCallId: 'c1', name: 'drop_everything', isError: true });
    expect(errorOf(result.content)).toMatchObject({ code: 'tool_not_found', details: { availableTools: ['echo'] } });
    expect(errorOf(result.content).message).toContain('echo');
  });

  it('answers arguments that are not JSON, or not an object, without calling the tool', async () => {
    const execute = jest.fn();
    const registry = new ToolRegistry();
    registry.register(echoTool({ execute }));
    for (const raw of ['{"objectName": ', '[1,2]', '42', '"text"']) {
      const result = await registry.execute({ id: 'c', name: 'echo', arguments: raw }, ctx());
      expect(result.isError).toBe(true);
      expect(errorOf(result.content).code).toBe('invalid_arguments');
    }
    expect(execute).not.toHaveBeenCalled();
  });

  it('validates arguments against the schema, names the wrong properties and never reaches execute', async () => {
    const execute = jest.fn();
    const registry = new ToolRegistry();
    registry.register(echoTool({ execute }));
    const result = await registry.execute(
      { id: 'c', name: 'echo', arguments: JSON.stringify({ count: 'x', mode: 'z', extra: 1 }) },
      ctx(),
    );
    expect(result.isError).toBe(true);
    const error = errorOf(result.content);
    expect(error.code).toBe('invalid_arguments');
    // allErrors: every problem in one round trip.
    expect(error.message).toContain('missing required property "objectName"');
    expect(error.message).toContain('count must be integer');
    expect(error.message).toContain('mode: "z" is not allowed; use one of a, b');
    expect(error.message).toContain('unknown property "extra" (allowed: objectName, count, mode)');
    expect(execute).not.toHaveBeenCalled();
  });

  it('passes parsed arguments from JSON text to the tool', async () => {
    const registry = new ToolRegistry();
    registry.register(echoTool());
    const result = await registry.execute({ id: 'c', name: 'echo', arguments: '{"objectName":"deal","count":2}' }, ctx());
    expect(result).toMatchObject({ isError: false, content: { echoed: { objectName: 'deal', count: 2 } } });
    expect(typeof result.durationMs).toBe('number');
  });

  it('maps a DomainError to its code, message and details', async () => {
    const registry = new ToolRegistry();
    registry.register(
      echoTool({ execute: () => Promise.reject(new DomainError('record_not_found', 'No such deal', { id: 'x' })) }),
    );
    const result = await registry.execute({ id: 'c', name: 'echo', arguments: { objectName: 'deal' } }, ctx());
    expect(result.isError).toBe(true);
    expect(result.content).toEqual({ error: { code: 'record_not_found', message: 'No such deal', details: { id: 'x' } } });
  });

  it('maps any other thrown error to a generic message without internals', async () => {
    const registry = new ToolRegistry();
    registry.register(echoTool({ execute: () => Promise.reject(new Error('connection string postgres://secret')) }));
    const spy = jest.spyOn((registry as unknown as { logger: Logger }).logger, 'error').mockImplementation(() => undefined);
    const result = await registry.execute({ id: 'c', name: 'echo', arguments: { objectName: 'deal' } }, ctx());
    expect(result.isError).toBe(true);
    expect(errorOf(result.content).code).toBe('tool_failed');
    expect(JSON.stringify(result.content)).not.toContain('secret');
    expect(spy).toHaveBeenCalled();
  });

  it('turns a throwing middleware into an error result too', async () => {
    const registry = new ToolRegistry();
    registry.register(echoTool());
    registry.use(() => Promise.reject(new Error('bug')));
    jest.spyOn((registry as unknown as { logger: Logger }).logger, 'error').mockImplementation(() => undefined);
    const result = await registry.execute({ id: 'c', name: 'echo', arguments: { objectName: 'deal' } }, ctx());
    expect(errorOf(result.content).code).toBe('tool_failed');
  });

  it('times out a hanging tool quickly, aborting its signal', async () => {
    let seen: AbortSignal | undefined;
    const registry = new ToolRegistry();
    registry.use(timeoutMiddleware(50));
    registry.register(
      echoTool({
        execute: (_args, c) => {
          seen = c.signal;
          return new Promise(() => undefined);
        },
      }),
    );
    const started = Date.now();
    const result = await registry.execute({ id: 'c', name: 'echo', arguments: { objectName: 'deal' } }, ctx());
    expect(Date.now() - started).toBeLessThan(1000);
    expect(result.isError).toBe(true);
    expect(errorOf(result.content)).toMatchObject({ code: 'tool_timeout', details: { timeoutMs: 50 } });
    expect(seen?.aborted).toBe(true);
  });

  it('lets a tool override the default timeout', async () => {
    const registry = new ToolRegistry();
    registry.use(timeoutMiddleware(10_000));
    registry.register(echoTool({ timeoutMs: 20, execute: () => new Promise(() => undefined) }));
    const result = await registry.execute({ id: 'c', name: 'echo', arguments: { objectName: 'deal' } }, ctx());
    expect(errorOf(result.content).code).toBe('tool_timeout');
  });

  it('aborts the tool when the caller aborts', async () => {
    let seen: AbortSignal | undefined;
    const registry = new ToolRegistry();
    registry.use(timeoutMiddleware(10_000));
    registry.register(
      echoTool({
        execute: (_a, c) => {
          seen = c.signal;
          return new Promise(() => undefined);
        },
      }),
    );
    const parent = new AbortController();
    const pending = registry.execute(
      { id: 'c', name: 'echo', arguments: { objectName: 'deal' } },
      ctx({ signal: parent.signal }),
    );
    setTimeout(() => parent.abort(), 10);
    const result = await pending;
    expect(errorOf(result.content).code).toBe('tool_aborted');
    expect(seen?.aborted).toBe(true);
  });

  it('runs middlewares with the first one outermost', async () => {
    const order: string[] = [];
    const trace =
      (name: string): ToolMiddleware =>
      async (_inv, _ctx, next) => {
        order.push(`${name}:before`);
        const outcome = await next();
        order.push(`${name}:after`);
        return outcome;
      };
    const registry = new ToolRegistry();
    registry.register(
      echoTool({
        execute: () => {
          order.push('tool');
          return Promise.resolve(1);
        },
      }),
    );
    registry.use(trace('a'), trace('b'));
    await registry.execute({ id: 'c', name: 'echo', arguments: { objectName: 'deal' } }, ctx());
    expect(order).toEqual(['a:before', 'b:before', 'tool', 'b:after', 'a:after']);
  });

  it('executeAll keeps call order and never exceeds the concurrency bound', async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const registry = new ToolRegistry();
    registry.register(
      echoTool({
        execute: async (args) => {
          inFlight++;
          maxInFlight = Math.max(maxInFlight, inFlight);
          // Later calls finish first, so completion order differs from call order.
          await new Promise((r) => setTimeout(r, 40 - Number(args.count) * 3));
          inFlight--;
          return { n: args.count };
        },
      }),
    );
    const calls = Array.from({ length: 10 }, (_, i) => ({
      id: `c${i}`,
      name: 'echo',
      arguments: { objectName: 'x', count: i + 1 },
    }));
    const results = await registry.executeAll(calls, ctx(), { concurrency: 3 });
    expect(results.map((r) => r.toolCallId)).toEqual(calls.map((c) => c.id));
    expect(results.map((r) => (r.content as { n: number }).n)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(maxInFlight).toBe(3);

    maxInFlight = 0;
    await registry.executeAll(calls, ctx());
    expect(maxInFlight).toBe(4);
  });

  it('executeAll includes failures in place', async () => {
    const registry = new ToolRegistry();
    registry.register(echoTool());
    const results = await registry.executeAll(
      [
        { id: 'a', name: 'echo', arguments: { objectName: 'x' } },
        { id: 'b', name: 'missing', arguments: {} },
        { id: 'c', name: 'echo', arguments: 'not json' },
      ],
      ctx(),
    );
    expect(results.map((r) => [r.toolCallId, r.isError])).toEqual([
      ['a', false],
      ['b', true],
      ['c', true],
    ]);
  });
});

describe('output cap', () => {
  const records = Array.from({ length: 300 }, (_, i) => ({ id: `id-${i}`, name: `Record number ${i}`, notes: 'x'.repeat(100) }));

  it("leaves a write proposal whole (a person approves all of it), and caps a write tool's error", async () => {
    const registry = new ToolRegistry();
    registry.use(outputCapMiddleware(16 * 1024));
    const proposal = { objectName: 'x', operation: 'update', changes: records, token: 't', expiresAt: 'e' };
    registry.register(echoTool({ name: 'propose', holds: 'proposal', execute: () => Promise.resolve(proposal) }));
    registry.register(
      echoTool({
        name: 'refuse',
        holds: 'proposal',
        execute: () => Promise.reject(new DomainError('record_not_found', 'no', { missing: records.map((r) => r.id) })),
      }),
    );
    const whole = await registry.execute({ id: 'c', name: 'propose', arguments: { objectName: 'x' } }, ctx());
    expect(whole.content).toEqual(proposal);
    const refused = await registry.execute({ id: 'd', name: 'refuse', arguments: { objectName: 'x' } }, ctx());
    expect(refused.isError).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(refused.content))).toBeLessThanOrEqual(16 * 1024);
  });

  it('drops records until the JSON fits, keeps it valid and says how many were omitted', async () => {
    const registry = new ToolRegistry();
    registry.use(outputCapMiddleware(16 * 1024));
    registry.register(echoTool({ execute: () => Promise.resolve({ count: 300, total: 1000, hasMore: true, records }) }));
    const result = await registry.execute({ id: 'c', name: 'echo', arguments: { objectName: 'x' } }, ctx());
    const json = JSON.stringify(result.content);
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(16 * 1024);
    const content = JSON.parse(json) as {
      truncated: boolean;
      records: unknown[];
      count: number;
      omittedCount: number;
      total: number;
      hasMore: boolean;
      note: string;
    };
    expect(content.truncated).toBe(true);
    expect(content.records.length).toBeGreaterThan(50);
    expect(content.count).toBe(content.records.length);
    expect(content.omittedCount).toBe(300 - content.records.length);
    expect(content.total).toBe(1000);
    expect(content.hasMore).toBe(true);
    expect(content.note).toMatch(/Narrow the query/);
    expect(content.note).toContain(`${content.omittedCount} of 300 records were left out`);
  });

  it('leaves small output untouched', () => {
    const content = { count: 1, records: [{ id: 1 }] };
    expect(capContent(content, 16 * 1024)).toBe(content);
  });

  it('falls back to a string preview with a note for output without a list', () => {
    const content = { text: '"quoted" \\ text '.repeat(5000) };
    const capped = capContent(content, 2048) as { truncated: boolean; note: string; preview: string };
    expect(Buffer.byteLength(JSON.stringify(capped))).toBeLessThanOrEqual(2048);
    expect(capped.truncated).toBe(true);
    expect(capped.note).toMatch(/Narrow the request/);
    expect(JSON.stringify(content).startsWith(capped.preview)).toBe(true);
    expect(capped.preview.length).toBeGreaterThan(500);
  });

  it('caps a plain large string', () => {
    const capped = capContent('é'.repeat(50_000), 1024);
    expect(Buffer.byteLength(JSON.stringify(capped))).toBeLessThanOrEqual(1024);
  });
});

describe('permission middleware', () => {
  const agent = { name: 'sales', tools: ['echo'], allowedObjects: ['deal', 'account'] };

  function registryWith(execute = jest.fn(() => Promise.resolve('ok'))) {
    const registry = new ToolRegistry();
    registry.use(permissionMiddleware());
    registry.register(echoTool({ execute }));
    registry.register(echoTool({ name: 'other', execute }));
    return { registry, execute };
  }

  it('denies a tool the agent does not list', async () => {
    const { registry, execute } = registryWith();
    const result = await registry.execute({ id: 'c', name: 'other', arguments: { objectName: 'deal' } }, ctx({ agent }));
    expect(errorOf(result.content)).toMatchObject({ code: 'tool_not_allowed', details: { allowedTools: ['echo'] } });
    expect(execute).not.toHaveBeenCalled();
  });

  it('denies an object outside allowedObjects', async () => {
    const { registry, execute } = registryWith();
    const result = await registry.execute({ id: 'c', name: 'echo', arguments: { objectName: 'contact' } }, ctx({ agent }));
    expect(errorOf(result.content)).toMatchObject({
      code: 'object_not_allowed',
      details: { allowedObjects: ['deal', 'account'] },
    });
    expect(execute).not.toHaveBeenCalled();
  });

  it('allows listed tools and objects, any object with "*", and everything without an agent', async () => {
    const { registry, execute } = registryWith();
    expect((await registry.execute({ id: 'c', name: 'echo', arguments: { objectName: 'deal' } }, ctx({ agent }))).isError).toBe(
      false,
    );
    const star = { ...agent, allowedObjects: ['*'] };
    expect(
      (await registry.execute({ id: 'c', name: 'echo', arguments: { objectName: 'contact' } }, ctx({ agent: star }))).isError,
    ).toBe(false);
    expect((await registry.execute({ id: 'c', name: 'other', arguments: { objectName: 'contact' } }, ctx())).isError).toBe(false);
    expect(execute).toHaveBeenCalledTimes(3);
  });

  it("answers an unknown tool with only the agent's tools as alternatives", async () => {
    const { registry } = registryWith();
    const result = await registry.execute({ id: 'c', name: 'nope', arguments: {} }, ctx({ agent }));
    expect(errorOf<{ availableTools: string[] }>(result.content).details.availableTools).toEqual(['echo']);
  });
});

describe('rate limit middleware', () => {
  it('limits per caller and tool within a sliding minute', async () => {
    let now = 1_000_000;
    const registry = new ToolRegistry();
    registry.use(rateLimitMiddleware(() => now));
    registry.register(echoTool({ rateLimit: { perMinute: 2 } }));
    const alice = ctx({ caller: { keyId: 'k1', role: 'member', subject: 'alice', owner: 'alice' } });
    const bob = ctx({ caller: { keyId: 'k2', role: 'member', subject: 'bob', owner: 'bob' } });
    const call = { id: 'c', name: 'echo', arguments: { objectName: 'x' } };
    expect((await registry.execute(call, alice)).isError).toBe(false);
    expect((await registry.execute(call, alice)).isError).toBe(false);
    const limited = await registry.execute(call, alice);
    expect(errorOf(limited.content).code).toBe('rate_limited');
    expect((await registry.execute(call, bob)).isError).toBe(false);
    now += 60_001;
    expect((await registry.execute(call, alice)).isError).toBe(false);
  });
});

describe('audit middleware', () => {
  it('logs tool, agent, caller, duration and error flag, never argument or result values', async () => {
    const log = jest.fn<void, [Record<string, unknown>]>();
    const registry = new ToolRegistry();
    registry.use(auditMiddleware({ log, error: jest.fn(), warn: jest.fn() }));
    registry.register(echoTool({ execute: () => Promise.resolve({ secretValue: 'top-secret-result' }) }));
    await registry.execute(
      { id: 'c9', name: 'echo', arguments: { objectName: 'secret-object-arg' } },
      ctx({
        caller: { keyId: 'k', role: 'member', subject: 'alice', owner: 'alice' },
        agent: { name: 'sales', tools: ['echo'], allowedObjects: ['*'] },
      }),
    );
    expect(log).toHaveBeenCalledTimes(1);
    const entry = log.mock.calls[0][0];
    expect(entry).toMatchObject({
      tool: 'echo',
      toolCallId: 'c9',
      agent: 'sales',
      caller: 'alice',
      isError: false,
      errorCode: null,
    });
    expect(typeof entry.durationMs).toBe('number');
    expect(JSON.stringify(entry)).not.toMatch(/secret/);
  });
});

describe('metrics middleware', () => {
  it('counts each call by tool and outcome (ok or the error code); an unknown tool never reaches it', async () => {
    const observeToolCall = jest.fn<void, [string, string, number]>();
    const registry = new ToolRegistry();
    registry.use(prometheusMiddleware({ observeToolCall }), permissionMiddleware());
    registry.register(echoTool());
    registry.register(echoTool({ name: 'broken', execute: () => Promise.reject(new DomainError('query_timeout', 'slow')) }));
    const agent = { name: 'sales', tools: ['echo', 'broken'], allowedObjects: ['deal'] };

    await registry.execute({ id: 'c1', name: 'echo', arguments: { objectName: 'deal' } }, ctx({ agent }));
    await registry.execute({ id: 'c2', name: 'echo', arguments: { objectName: 'secret' } }, ctx({ agent }));
    await registry.execute({ id: 'c3', name: 'echo', arguments: { objectName: 'deal', count: 0 } }, ctx({ agent }));
    await registry.execute({ id: 'c4', name: 'broken', arguments: { objectName: 'deal' } }, ctx({ agent }));
    // An unknown tool never reaches the chain: its made-up name cannot become a label.
    await registry.execute({ id: 'c5', name: 'made_up_by_the_model', arguments: {} }, ctx({ agent }));

    expect(observeToolCall.mock.calls.map(([tool, outcome]) => [tool, outcome])).toEqual([
      ['echo', 'ok'],
      ['echo', 'object_not_allowed'],
      ['echo', 'invalid_arguments'],
      ['broken', 'query_timeout'],
    ]);
    for (const [, , seconds] of observeToolCall.mock.calls) expect(seconds).toBeGreaterThanOrEqual(0);
  });
});
