import { plainToInstance } from 'class-transformer';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../common/project-root';
import { definitionFingerprint, storedDefinition, type StoredDefinition } from './agent-definition';
import { AgentSpecDto } from './agent.dto';
import { planBuiltin, readBuiltinSeeds, SHIPPED_BUILTINS, type StoredBuiltin } from './builtin-agents';

function seedFile(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(projectRoot(), path), 'utf8')) as Record<string, unknown>;
}

/** A seed file's definition as the server stores it. */
function definitionIn(path: string): StoredDefinition {
  return storedDefinition(plainToInstance(AgentSpecDto, { ...seedFile(path), builtinVersion: undefined }), {});
}

const shippedFile = (n: number) => `test/support/builtin-agents/data_chat.shipped-${n}.json`;

describe('built-in agent definitions', () => {
  it('holds each seed file to the last shipped definition of its name: a changed seed needs a new builtinVersion', async () => {
    const seeds = await readBuiltinSeeds();
    expect(seeds.map((seed) => seed.file)).toEqual(['data_chat.json']);
    for (const seed of seeds) {
      const shipped = SHIPPED_BUILTINS[seed.spec.name];
      expect({
        file: seed.file,
        version: seed.version,
        fingerprint: definitionFingerprint(definitionIn(`seeds/agents/${seed.file}`)),
      }).toEqual({ file: seed.file, ...shipped[shipped.length - 1] });
      expect(shipped.every((earlier) => earlier.version <= seed.version)).toBe(true);
    }
  });

  it.each([1, 2, 3, 4])('knows data_chat as shipped before versions (%i) as version 1', (n) => {
    expect(SHIPPED_BUILTINS.data_chat[n - 1]).toEqual({
      version: 1,
      fingerprint: definitionFingerprint(definitionIn(shippedFile(n))),
    });
  });

  it('fingerprints what the agent does, not how its JSON is ordered or which defaults were stored', () => {
    const definition = definitionIn(shippedFile(4));
    const fingerprint = definitionFingerprint(definition);
    const reordered = Object.fromEntries(Object.entries(definition).reverse()) as StoredDefinition;
    expect(
      definitionFingerprint({ ...reordered, guardrails: { maxTokensPerInvocation: 100000, maxExecutionTimeSec: 120 } }),
    ).toBe(fingerprint);
    // Stored before maxToolCallsPerStep and grounding existed: the runtime reads their defaults.
    expect(
      definitionFingerprint({ ...definition, planning: { maxIterations: 10 } as StoredDefinition['planning'], grounding: '' }),
    ).toBe(fingerprint);
    for (const edit of [
      { instructions: `${definition.instructions} ` },
      { active: false },
      { model: { temperature: 0.2 } },
      { model: { temperature: 0.1, locale: 'de-DE' } },
      { tools: [...definition.tools].reverse() },
      { access: { roles: ['admin' as const] } },
      { grounding: 'retry' as const },
    ]) {
      expect(definitionFingerprint({ ...definition, ...edit })).not.toBe(fingerprint);
    }
  });
});

describe('planBuiltin', () => {
  const seedVersion = seedFile('seeds/agents/data_chat.json').builtinVersion as number;
  const old = definitionIn(shippedFile(1));
  const current = definitionIn('seeds/agents/data_chat.json');
  const seed = { version: seedVersion, fingerprint: definitionFingerprint(current) };
  /** A release after this one, with another definition. */
  const newer = { version: seedVersion + 1, fingerprint: 'f'.repeat(64) };
  const second = { version: 2, fingerprint: 'f'.repeat(64) };
  const row = (definition: StoredDefinition, builtin: Partial<StoredBuiltin> = {}): StoredBuiltin => ({
    ...definition,
    builtinVersion: null,
    builtinFingerprint: null,
    ...builtin,
  });
  const recorded = (definition: StoredDefinition, version: number) => ({
    builtinVersion: version,
    builtinFingerprint: definitionFingerprint(definition),
  });

  it('creates an absent agent', () => {
    expect(planBuiltin(null, seed)).toEqual({ action: 'create' });
  });

  it.each([1, 2, 3, 4])('upgrades an agent stored before versions whose definition is shipped definition %i', (n) => {
    expect(planBuiltin(row(definitionIn(shippedFile(n))), second)).toEqual({ action: 'upgrade', from: 1 });
  });

  it('upgrades an agent that is what the server last wrote, from an older version', () => {
    expect(planBuiltin(row(old, recorded(old, 1)), second)).toEqual({ action: 'upgrade', from: 1 });
    expect(planBuiltin(row(current, recorded(current, seedVersion)), newer)).toEqual({ action: 'upgrade', from: seedVersion });
  });

  it('leaves an edited agent alone, saying so only when the seed is newer than what it was made from', () => {
    const edited = { ...old, instructions: 'Edited by an admin' };
    expect(planBuiltin(row(edited), seed)).toEqual({ action: 'edited' });
    expect(planBuiltin(row(edited, recorded(old, 1)), second)).toEqual({ action: 'edited' });
    const editedCurrent = { ...current, active: false };
    expect(planBuiltin(row(editedCurrent, recorded(current, seedVersion)), seed)).toEqual({ action: 'none' });
    expect(planBuiltin(row(editedCurrent, recorded(current, seedVersion)), newer)).toEqual({ action: 'edited' });
  });

  it('does nothing to an agent already at the seed’s version, or at a newer one (an older replica starting)', () => {
    expect(planBuiltin(row(current, recorded(current, seedVersion)), seed)).toEqual({ action: 'none' });
    expect(planBuiltin(row(current, recorded(current, seedVersion + 1)), seed)).toEqual({ action: 'none' });
  });

  it('records the version of an agent that already has the seed’s definition: stored before versions, or put back by an admin', () => {
    expect(planBuiltin(row(current), seed)).toEqual({ action: 'record' });
    expect(planBuiltin(row(current, recorded(old, 1)), { ...seed, version: 2 })).toEqual({ action: 'record' });
  });

  it('knows no shipped definitions for other names', () => {
    expect(planBuiltin(row({ ...old, name: 'constructor' }), seed)).toEqual({ action: 'edited' });
  });
});
