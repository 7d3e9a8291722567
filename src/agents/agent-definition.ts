import { createHash } from 'node:crypto';
import { canonicalJson } from '../common/canonical-json';
import { DomainError } from '../common/domain-error';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';
import type { AgentSpecDto } from './agent.dto';
import { toSpec, type AgentDefinitionFields } from './agent.mapper';
import { AGENT_DEFAULTS, type AgentSpec, type AgentWrites, type StoredModelSettings } from './agent.types';

/**
 * An agent's definition as stored: everything an admin's PUT replaces (the locale inside the model
 * settings' JSON); no id, version or timestamps.
 */
export type StoredDefinition = Omit<AgentSpec, 'version' | 'locale' | 'model'> & { model: StoredModelSettings };

/**
 * The definition a spec stores, with its defaults filled in; `writes` as checked against the objects.
 * Tool names are deduplicated here and checked against the registry by the caller.
 */
export function storedDefinition(dto: AgentSpecDto, writes: AgentWrites): StoredDefinition {
  const allowedObjects = [...new Set(dto.allowedObjects ?? ['*'])];
  const badObject = allowedObjects.find((o) => o !== '*' && !IDENTIFIER_PATTERN.test(o));
  if (badObject !== undefined)
    throw new DomainError('validation_failed', `allowedObjects: "${badObject}" is not an object name or "*"`);
  return {
    name: dto.name,
    label: dto.label,
    role: dto.role ?? 'assistant',
    description: dto.description ?? null,
    instructions: dto.instructions,
    model: { ...dto.model, ...(dto.locale !== undefined ? { locale: canonicalLocale(dto.locale) } : {}) },
    tools: [...new Set(dto.tools ?? [])],
    allowedObjects,
    writes,
    planning: {
      maxIterations: dto.planning?.maxIterations ?? AGENT_DEFAULTS.maxIterations,
      maxToolCallsPerStep: dto.planning?.maxToolCallsPerStep ?? AGENT_DEFAULTS.maxToolCallsPerStep,
    },
    guardrails: {
      maxExecutionTimeSec: dto.guardrails?.maxExecutionTimeSec ?? AGENT_DEFAULTS.maxExecutionTimeSec,
      maxTokensPerInvocation: dto.guardrails?.maxTokensPerInvocation ?? AGENT_DEFAULTS.maxTokensPerInvocation,
    },
    access: { ...dto.access },
    grounding: dto.grounding ?? 'annotate',
    active: dto.active ?? true,
  };
}

/**
 * A digest of what an agent does: its definition as the runtime reads it (defaults of settings added
 * since it was stored filled in), keys sorted, so equal definitions have equal fingerprints whatever
 * the JSON columns' key order. A setting added later should be absent when unset, so that the
 * fingerprints of agents stored before it stay what they were.
 */
export function definitionFingerprint(stored: AgentDefinitionFields): string {
  const definition = { ...toSpec({ ...stored, version: 0 }), version: undefined };
  return createHash('sha256').update(canonicalJson(definition)).digest('hex');
}

/** A BCP 47 locale in its canonical form ("en-us" → "en-US"); anything else is a 400. */
function canonicalLocale(locale: string): string {
  try {
    const [canonical] = Intl.getCanonicalLocales(locale);
    if (canonical && Intl.NumberFormat.supportedLocalesOf(canonical).length) return canonical;
  } catch {
    // Falls through to the error below.
  }
  throw new DomainError('validation_failed', `locale: "${locale.slice(0, 40)}" is not a BCP 47 locale this server knows`);
}
