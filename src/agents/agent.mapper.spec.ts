import type { Agent } from './agent.entity';
import { toAgentResponse, toAgentSummary, toSpec } from './agent.mapper';

function stored(overrides: Partial<Agent> = {}): Agent {
  return {
    id: '6f1c2a5e-0d1b-4c3e-9a7f-2b8d4e6f1a3c',
    name: 'sales',
    label: 'Sales',
    role: 'analyst',
    description: null,
    instructions: 'Answer from data.',
    model: { model: 'gpt-x', temperature: 0.1, locale: 'de' },
    tools: ['query_records'],
    allowedObjects: ['deal'],
    writes: {},
    planning: { maxIterations: 4, maxToolCallsPerStep: 2 },
    guardrails: { maxExecutionTimeSec: 30, maxTokensPerInvocation: 5000 },
    access: { roles: ['member'] },
    grounding: 'retry',
    active: true,
    version: 3,
    builtinVersion: null,
    builtinFingerprint: null,
    createdAt: new Date('2026-01-02T03:04:05.000Z'),
    updatedAt: new Date('2026-02-03T04:05:06.000Z'),
    ...overrides,
  };
}

describe('toSpec', () => {
  it('takes the locale out of the stored model settings', () => {
    const spec = toSpec(stored());
    expect(spec.model).toEqual({ model: 'gpt-x', temperature: 0.1 });
    expect(spec.locale).toBe('de');
    expect(spec).not.toHaveProperty('id');
    expect(spec).not.toHaveProperty('createdAt');
  });

  it('gives an agent stored before a setting existed its default: locale en, the planning defaults, annotate', () => {
    const spec = toSpec(
      stored({ model: { model: 'gpt-x' }, planning: {} as Agent['planning'], grounding: 'unknown', description: undefined }),
    );
    expect(spec.locale).toBe('en');
    expect(spec.planning).toEqual({ maxIterations: 10, maxToolCallsPerStep: 16 });
    expect(spec.grounding).toBe('annotate');
    expect(spec.description).toBeNull();
  });

  it('keeps a stored planning value over its default, filling only what is missing', () => {
    expect(toSpec(stored({ planning: { maxIterations: 7 } as Agent['planning'] })).planning).toEqual({
      maxIterations: 7,
      maxToolCallsPerStep: 16,
    });
  });
});

describe('toAgentResponse and toAgentSummary', () => {
  it('add ISO timestamps to the spec, and a summary has name, label, role and active only', () => {
    const agent = stored();
    expect(toAgentResponse(agent)).toEqual({
      ...toSpec(agent),
      createdAt: '2026-01-02T03:04:05.000Z',
      updatedAt: '2026-02-03T04:05:06.000Z',
    });
    expect(toAgentSummary(agent)).toEqual({ name: 'sales', label: 'Sales', role: 'analyst', active: true });
  });
});
