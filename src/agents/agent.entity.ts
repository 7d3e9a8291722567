import { defineEntity, InferEntity, p } from '@mikro-orm/core';
import type { AgentAccess, AgentGuardrails, AgentPlanning, AgentWrites, StoredModelSettings } from './agent.types';

/** An admin-defined agent: instructions, model settings, the tools and objects it may use, its limits. */
export const AgentEntity = defineEntity({
  name: 'Agent',
  tableName: 'agents',
  properties: {
    id: p.uuid().primary(),
    name: p.string().unique(),
    label: p.string(),
    role: p.string(),
    description: p.text().nullable(),
    instructions: p.text(),
    model: p.json<StoredModelSettings>(),
    tools: p.json<string[]>(),
    allowedObjects: p.json<string[]>(),
    writes: p.json<AgentWrites>().default('{}'),
    planning: p.json<AgentPlanning>(),
    guardrails: p.json<AgentGuardrails>(),
    access: p.json<AgentAccess>(),
    grounding: p.string().default('annotate'),
    active: p.boolean(),
    version: p.integer(),
    /** Of a built-in (seeds/agents): the builtinVersion of its seed the server last wrote; null otherwise. */
    builtinVersion: p.integer().nullable(),
    /** Of a built-in: the fingerprint of the definition the server last wrote (definitionFingerprint). */
    builtinFingerprint: p.string().length(64).nullable(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type Agent = InferEntity<typeof AgentEntity>;
