import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable, Logger } from '@nestjs/common';
import { LockMode } from '@mikro-orm/core';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { PgPubSub } from '../database/pg-pubsub.service';
import { deepFreeze, ReplicatedCache } from '../database/replicated-cache';
import { AuditLog, type AuditActor } from '../audit/audit-log.service';
import { MetadataService } from '../metadata/metadata.service';
import { ToolRegistry } from '../tools/tool.registry';
import { AgentListResponse, AgentResponse, AgentSpecDto } from './agent.dto';
import { definitionFingerprint, storedDefinition, type StoredDefinition } from './agent-definition';
import { Agent, AgentEntity } from './agent.entity';
import { toAgentResponse, toAgentSummary, toSpec } from './agent.mapper';
import { planBuiltin, readBuiltinSeeds, type BuiltinPlan, type BuiltinSeed } from './builtin-agents';
import {
  AGENT_MAX_ITERATIONS,
  AGENT_NAME_PATTERN,
  AgentSpec,
  WRITE_OPERATIONS,
  type AgentWrites,
  type WriteOperation,
} from './agent.types';

/** Event telling every replica to drop its cached agents. */
const AGENTS_CHANGED = 'agents_changed';

/** What loadForRun needs of a stored agent, kept per replica: every turn of every chat loads its agent. */
interface RunnableAgent {
  spec: AgentSpec;
  /** Why the stored agent cannot run (findProblem), if it cannot. */
  problem?: string;
}

/** Agent specs: CRUD for admins, loading and access checks for the runtime, built-ins from seeds/agents. */
@Injectable()
export class AgentService {
  private readonly logger = new Logger(AgentService.name);
  private readonly runnable: ReplicatedCache<RunnableAgent | null>;

  constructor(
    private readonly em: EntityManager,
    private readonly tools: ToolRegistry,
    pubsub: PgPubSub,
    private readonly audit: AuditLog,
    private readonly metadata: MetadataService,
  ) {
    this.runnable = new ReplicatedCache(pubsub, AGENTS_CHANGED);
  }

  /** Agents the caller may use: active and within its access. Admins see every agent, inactive ones too, to manage them. */
  async listFor(caller: Caller): Promise<AgentListResponse> {
    const agents = await this.em.fork().find(AgentEntity, {}, { orderBy: { name: 'asc' } });
    const visible = caller.role === 'admin' ? agents : agents.filter((agent) => agent.active && mayUse(agent, caller));
    return { agents: visible.map(toAgentSummary) };
  }

  /**
   * Agents the caller may run now: active, valid (what loadForRun would load) and within its access;
   * for admins too, unlike `listFor`.
   */
  async listUsable(caller: Caller): Promise<AgentResponse[]> {
    const agents = await this.em.fork().find(AgentEntity, { active: true }, { orderBy: { name: 'asc' } });
    return agents.filter((agent) => !this.findProblem(agent) && mayUse(agent, caller)).map(toAgentResponse);
  }

  /** One agent the caller may run now; any other name is as unknown as a missing one (404). */
  async getUsable(name: string, caller: Caller): Promise<AgentResponse> {
    const agent = await findByName(this.em.fork(), name);
    if (!agent || !agent.active || this.findProblem(agent) || !mayUse(agent, caller)) {
      throw new DomainError('agent_not_found', `Agent "${name}" not found or not available to this key`);
    }
    return toAgentResponse(agent);
  }

  async get(name: string): Promise<AgentResponse> {
    const agent = await findByName(this.em.fork(), name);
    if (!agent) throw new DomainError('agent_not_found', `Agent "${name}" not found`);
    return toAgentResponse(agent);
  }

  async create(dto: AgentSpecDto, actor?: AuditActor): Promise<AgentResponse> {
    return this.changing(async (em) => {
      if (await em.findOne(AgentEntity, { name: dto.name })) {
        throw new DomainError('agent_exists', `Agent "${dto.name}" already exists`);
      }
      const now = new Date();
      const agent = em.create(AgentEntity, {
        id: randomUUID(),
        ...(await this.definition(dto)),
        version: 1,
        createdAt: now,
        updatedAt: now,
      });
      await em.persist(agent).flush();
      await this.audit.admin(em, actor, 'agent.create', agent.name);
      return toAgentResponse(agent);
    });
  }

  /** Replaces the whole spec; the version goes up by one. */
  async replace(name: string, dto: AgentSpecDto, actor?: AuditActor): Promise<AgentResponse> {
    if (dto.name !== name)
      throw new DomainError('validation_failed', `The body names agent "${dto.name}" but the path names "${name}"`);
    return this.changing(async (em) => {
      // Locked: a replica upgrading a built-in at the same time sees this edit, or this one sees its upgrade.
      const agent = await findByName(em, name, LockMode.PESSIMISTIC_WRITE);
      if (!agent) throw new DomainError('agent_not_found', `Agent "${name}" not found`);
      em.assign(agent, {
        ...(await this.definition(dto)),
        version: agent.version + 1,
        updatedAt: new Date(),
      });
      await em.flush();
      await this.audit.admin(em, actor, 'agent.update', agent.name);
      return toAgentResponse(agent);
    });
  }

  async delete(name: string, actor?: AuditActor): Promise<void> {
    await this.changing(async (em) => {
      const deleted = AGENT_NAME_PATTERN.test(name) ? await em.nativeDelete(AgentEntity, { name }) : 0;
      if (!deleted) throw new DomainError('agent_not_found', `Agent "${name}" not found`);
      await this.audit.admin(em, actor, 'agent.delete', name);
    });
  }

  /**
   * The agent a caller wants to run: 404 when missing or no longer valid (e.g. it names a tool
   * that no longer exists), 403 when inactive or the caller is not in its access lists.
   */
  async loadForRun(name: string, caller: Caller): Promise<AgentSpec> {
    // Misses are not kept: a name that does not exist costs its caller a read, never this cache's room.
    const agent = await this.runnable.get(
      name,
      async () => {
        const stored = await findByName(this.em.fork(), name);
        return stored && deepFreeze({ spec: toSpec(stored), problem: this.findProblem(stored) });
      },
      (found) => found !== null,
    );
    if (!agent) throw new DomainError('agent_not_found', `Agent "${name}" not found`);
    if (agent.problem) throw new DomainError('agent_not_found', `Agent "${name}" is invalid: ${agent.problem}`);
    if (!agent.spec.active) throw new DomainError('agent_inactive', `Agent "${name}" is inactive`);
    if (!mayUse(agent.spec, caller)) throw new DomainError('agent_forbidden', `You may not use agent "${name}"`);
    return agent.spec;
  }

  /**
   * Runs an agent write in a transaction that tells every replica to drop its cached agents on commit;
   * this replica drops them right after the commit.
   */
  private async changing<T>(work: (em: EntityManager) => Promise<T>): Promise<T> {
    const result = await this.em.fork().transactional(async (em) => {
      const done = await work(em);
      await this.runnable.publishChange(em);
      return done;
    });
    this.runnable.invalidate();
    return result;
  }

  /**
   * `writes` as stored: each key an existing object, each value a list of create / update / delete (once
   * each); absent: none. Whether a caller may make a write is decided per caller when it is approved.
   */
  private async checkWrites(input: Record<string, unknown> | undefined): Promise<AgentWrites> {
    if (input === undefined) return {};
    const writes: AgentWrites = {};
    const objects = new Set((await this.metadata.listObjects()).map((object) => object.name));
    for (const [objectName, operations] of Object.entries(input)) {
      if (!objects.has(objectName)) {
        throw new DomainError('validation_failed', `writes: object "${objectName.slice(0, 100)}" does not exist`, {
          availableObjects: [...objects],
        });
      }
      if (!Array.isArray(operations) || operations.some((op) => !(WRITE_OPERATIONS as readonly unknown[]).includes(op))) {
        throw new DomainError(
          'validation_failed',
          `writes.${objectName} must be a list of ${WRITE_OPERATIONS.map((op) => `"${op}"`).join(', ')}`,
        );
      }
      writes[objectName] = [...new Set(operations as WriteOperation[])];
    }
    return writes;
  }

  /** The definition a spec stores; unknown tools and objects of `writes` are a 400. */
  private async definition(dto: AgentSpecDto): Promise<StoredDefinition> {
    const { unknown } = this.tools.resolve(dto.tools ?? []);
    if (unknown.length) {
      const names = [...new Set(unknown)];
      throw new DomainError('unknown_tool', `Unknown tool${names.length > 1 ? 's' : ''}: ${names.join(', ')}`, {
        availableTools: this.tools.list().map((t) => t.name),
      });
    }
    return storedDefinition(dto, await this.checkWrites(dto.writes));
  }

  /** A stored agent can go stale (a tool removed in an upgrade): such an agent is not run. */
  private findProblem(agent: Agent): string | undefined {
    const missing = this.tools.resolve(agent.tools).unknown;
    if (missing.length) return `it names unknown tools ${missing.join(', ')}`;
    const iterations = agent.planning?.maxIterations;
    if (!Number.isInteger(iterations) || iterations < 1 || iterations > AGENT_MAX_ITERATIONS) {
      return `planning.maxIterations must be 1..${AGENT_MAX_ITERATIONS}`;
    }
    return undefined;
  }

  /**
   * Built-in agents from seeds/agents/*.json: created when absent, upgraded to a newer builtinVersion of
   * their seed when nobody edited them, left alone when an admin did (planBuiltin). Runs at start, under
   * the start-up lock; each agent's row is locked while it is decided, so an admin's PUT on another
   * replica is either seen or waits.
   */
  async ensureBuiltIns(): Promise<void> {
    for (const seed of await readBuiltinSeeds()) {
      const outcome = await this.ensureBuiltIn(seed);
      const agent = seed.spec.name;
      if (outcome.action === 'create') this.logger.log({ msg: 'created built-in agent', agent, builtinVersion: seed.version });
      if (outcome.action === 'upgrade') {
        this.logger.log({
          msg: 'upgraded built-in agent',
          agent,
          fromBuiltinVersion: outcome.from,
          builtinVersion: seed.version,
          version: outcome.version,
        });
      }
      if (outcome.action === 'edited') {
        this.logger.log({
          msg: 'built-in agent has a newer definition, not applied: it was edited through the API',
          agent,
          builtinVersion: seed.version,
        });
      }
    }
  }

  private async ensureBuiltIn(seed: BuiltinSeed): Promise<BuiltinPlan & { version?: number }> {
    let changed = false;
    const definition = await this.definition(seed.spec);
    const builtin = { builtinVersion: seed.version, builtinFingerprint: definitionFingerprint(definition) };
    const outcome = await this.em.fork().transactional(async (em) => {
      const stored = await findByName(em, seed.spec.name, LockMode.PESSIMISTIC_WRITE);
      const plan = planBuiltin(stored, { version: seed.version, fingerprint: builtin.builtinFingerprint });
      if (plan.action === 'edited' || plan.action === 'none') return plan;
      if (plan.action === 'record' && stored) {
        // What the agent does stays as it is, and so does its version.
        em.assign(stored, builtin);
        await em.flush();
        return plan;
      }
      const now = new Date();
      let agent: Agent;
      if (stored) {
        agent = em.assign(stored, { ...definition, ...builtin, version: stored.version + 1, updatedAt: now });
      } else {
        agent = em.create(AgentEntity, {
          id: randomUUID(),
          ...definition,
          ...builtin,
          version: 1,
          createdAt: now,
          updatedAt: now,
        });
      }
      await em.flush();
      await this.audit.admin(em, undefined, stored ? 'agent.upgrade' : 'agent.create', agent.name);
      await this.runnable.publishChange(em);
      changed = true;
      return { ...plan, version: agent.version };
    });
    if (changed) this.runnable.invalidate();
    return outcome;
  }
}

/**
 * The stored agent of this name. A name that no agent can have (every one was created through the
 * name pattern) is not looked up: with a NUL in it, PostgreSQL cannot even receive it as a parameter.
 */
function findByName(em: EntityManager, name: unknown, lockMode?: LockMode): Promise<Agent | null> {
  return typeof name === 'string' && AGENT_NAME_PATTERN.test(name)
    ? em.findOne(AgentEntity, { name }, lockMode ? { lockMode } : {})
    : Promise.resolve(null);
}

function mayUse(agent: Pick<Agent, 'access'>, caller: Caller): boolean {
  if (caller.role === 'admin') return true;
  const { roles, subjects } = agent.access ?? {};
  if (!roles && !subjects) return true;
  return (roles ?? []).includes(caller.role) || (subjects ?? []).includes(caller.subject);
}
