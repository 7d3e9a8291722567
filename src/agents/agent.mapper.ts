import type { AgentResponse, AgentSummaryResponse } from './agent.dto';
import type { Agent } from './agent.entity';
import { AGENT_DEFAULTS, DEFAULT_AGENT_LOCALE, isGroundingMode, type AgentPlanning, type AgentSpec } from './agent.types';

const AGENT_PLANNING_DEFAULTS: AgentPlanning = {
  maxIterations: AGENT_DEFAULTS.maxIterations,
  maxToolCallsPerStep: AGENT_DEFAULTS.maxToolCallsPerStep,
};

/** What an agent row says of the agent itself: its definition, without id, version or timestamps. */
export type AgentDefinitionFields = Pick<
  Agent,
  | 'name'
  | 'label'
  | 'role'
  | 'description'
  | 'instructions'
  | 'model'
  | 'tools'
  | 'allowedObjects'
  | 'writes'
  | 'planning'
  | 'guardrails'
  | 'access'
  | 'grounding'
  | 'active'
>;

/** The stored agent as the runtime sees it. */
export function toSpec(agent: AgentDefinitionFields & Pick<Agent, 'version'>): AgentSpec {
  const { locale, ...model } = agent.model;
  return {
    name: agent.name,
    label: agent.label,
    role: agent.role,
    description: agent.description ?? null,
    instructions: agent.instructions,
    model,
    tools: agent.tools,
    allowedObjects: agent.allowedObjects,
    writes: agent.writes ?? {},
    // Agents stored before a planning setting existed get its default.
    planning: { ...AGENT_PLANNING_DEFAULTS, ...agent.planning },
    guardrails: agent.guardrails,
    access: agent.access,
    grounding: isGroundingMode(agent.grounding) ? agent.grounding : 'annotate',
    locale: locale ?? DEFAULT_AGENT_LOCALE,
    active: agent.active,
    version: agent.version,
  };
}

export function toAgentSummary(agent: Agent): AgentSummaryResponse {
  return { name: agent.name, label: agent.label, role: agent.role, active: agent.active };
}

/** The admin view: the whole spec plus timestamps. */
export function toAgentResponse(agent: Agent): AgentResponse {
  return { ...toSpec(agent), createdAt: agent.createdAt.toISOString(), updatedAt: agent.updatedAt.toISOString() };
}
