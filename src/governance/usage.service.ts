import { EntityManager } from '@mikro-orm/postgresql';
import { Inject, Injectable } from '@nestjs/common';
import type { Caller } from '../auth/auth.decorators';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { runSql } from '../database/sql';
import { MAX_USAGE_ROWS, UsageQueryDto, UsageReportResponse } from './usage.dto';

/** Who a model call is made for: the key, the agent and the durable chat, when there is one. */
export interface UsageScope {
  keyId?: string;
  agent?: string;
  chatId?: string;
}

/** One model call as it is recorded. */
export interface UsageEntry extends UsageScope {
  model: string;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  durationMs: number;
  /** `ok`, or the error code the call failed with. */
  outcome: string;
}

const GROUP_COLUMNS = {
  key: { select: `"key_id" as "keyId"`, group: `"key_id"`, order: `sum("total_tokens") desc, "key_id"` },
  agent: { select: `"agent"`, group: `"agent"`, order: `sum("total_tokens") desc, "agent"` },
  day: {
    select: `to_char(("at" at time zone 'UTC')::date, 'YYYY-MM-DD') as "day"`,
    group: `("at" at time zone 'UTC')::date`,
    order: `("at" at time zone 'UTC')::date desc`,
  },
} as const;

/**
 * Token quotas and usage. Every model call is a `usage` row, written when the call ends; before each
 * call the quota check sums today's (UTC) rows of the key and of the agent in one statement on their
 * indexes. Summing the table instead of counting in memory keeps the quota exact across replicas;
 * what it allows past the limit is at most the calls already in flight when the limit was reached.
 */
@Injectable()
export class UsageService {
  constructor(
    private readonly em: EntityManager,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** 429 `quota_exceeded` (Retry-After: the next UTC midnight) when the key or the agent has spent its tokens of the day. */
  async assertWithinQuota(scope: UsageScope, now = new Date()): Promise<void> {
    const keyId = isUuid(scope.keyId) ? scope.keyId : null;
    const agentQuota = scope.agent ? (this.config.quotaTokensPerAgentDay ?? null) : null;
    if (!keyId && this.config.quotaTokensPerKeyDay === undefined && agentQuota === null) return;
    const dayStart = startOfUtcDay(now);
    const [row] = await runSql<{ keyQuota: string | null; keyUsed: string; agentUsed: string }>(
      this.em.fork(),
      `with "quota" as (
         select coalesce((select "tokens_per_day"::bigint from "api_keys" where "id" = $1), $2::bigint) as "keyQuota"
       )
       select "keyQuota",
         case when "keyQuota" is null then 0
           else (select coalesce(sum("total_tokens"), 0) from "usage" where "key_id" = $1 and "at" >= $4) end as "keyUsed",
         case when $3::bigint is null then 0
           else (select coalesce(sum("total_tokens"), 0) from "usage" where "agent" = $5 and "at" >= $4) end as "agentUsed"
       from "quota"`,
      [keyId, this.config.quotaTokensPerKeyDay ?? null, agentQuota, dayStart, scope.agent ?? null],
    );
    const retryAfterSeconds = Math.max(1, Math.ceil((dayStart.getTime() + DAY_MS - now.getTime()) / 1000));
    const resetsAt = new Date(dayStart.getTime() + DAY_MS).toISOString();
    if (row.keyQuota !== null && Number(row.keyUsed) >= Number(row.keyQuota)) {
      throw new DomainError(
        'quota_exceeded',
        `This API key has used its ${row.keyQuota} model tokens of the day (UTC); the quota resets at ${resetsAt}`,
        { scope: 'key', quota: Number(row.keyQuota), used: Number(row.keyUsed), resetsAt },
        { retryAfterSeconds },
      );
    }
    if (agentQuota !== null && Number(row.agentUsed) >= agentQuota) {
      throw new DomainError(
        'quota_exceeded',
        `Agent "${scope.agent}" has used its ${agentQuota} model tokens of the day (UTC); the quota resets at ${resetsAt}`,
        { scope: 'agent', quota: agentQuota, used: Number(row.agentUsed), resetsAt },
        { retryAfterSeconds },
      );
    }
  }

  async record(entry: UsageEntry): Promise<void> {
    await runSql(
      this.em.fork(),
      `insert into "usage" ("key_id", "agent", "chat_id", "model", "prompt_tokens", "completion_tokens", "total_tokens", "duration_ms", "outcome")
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        isUuid(entry.keyId) ? entry.keyId : null,
        entry.agent ?? null,
        isUuid(entry.chatId) ? entry.chatId : null,
        entry.model.slice(0, 200),
        clampInt(entry.promptTokens),
        clampInt(entry.completionTokens),
        clampInt(entry.totalTokens),
        clampInt(entry.durationMs),
        entry.outcome.slice(0, 100),
      ],
    );
  }

  /** Totals per key, agent or UTC day; a member key gets its own calls only, whatever keyId it names. */
  async report(caller: Caller, query: UsageQueryDto): Promise<UsageReportResponse> {
    const group = GROUP_COLUMNS[query.groupBy ?? 'key'];
    const conditions: string[] = [];
    const params: unknown[] = [];
    const add = (condition: (param: string) => string, value: unknown) => {
      params.push(value);
      conditions.push(condition(`$${params.length}`));
    };
    const keyId = caller.role === 'admin' ? query.keyId : caller.keyId;
    if (keyId !== undefined) add((p) => `"key_id" = ${p}::uuid`, isUuid(keyId) ? keyId : null);
    if (query.agent !== undefined) add((p) => `"agent" = ${p}`, query.agent);
    if (query.from !== undefined) add((p) => `"at" >= ${p}::timestamptz`, parseTime(query.from, 'from'));
    if (query.to !== undefined) add((p) => `"at" < ${p}::timestamptz`, parseTime(query.to, 'to'));
    const rows = await runSql<Record<string, string | null>>(
      this.em.fork(),
      `select ${group.select}, count(*) as "calls", sum("prompt_tokens") as "promptTokens",
         sum("completion_tokens") as "completionTokens", sum("total_tokens") as "totalTokens"
       from "usage" ${conditions.length ? `where ${conditions.join(' and ')}` : ''}
       group by ${group.group} order by ${group.order} limit ${MAX_USAGE_ROWS}`,
      params,
    );
    return {
      rows: rows.map((row) => ({
        ...('keyId' in row ? { keyId: row.keyId } : {}),
        ...('agent' in row ? { agent: row.agent } : {}),
        ...(row.day ? { day: row.day } : {}),
        calls: Number(row.calls),
        promptTokens: Number(row.promptTokens),
        completionTokens: Number(row.completionTokens),
        totalTokens: Number(row.totalTokens),
      })),
    };
  }
}

const DAY_MS = 86_400_000;

function startOfUtcDay(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()));
}

function clampInt(value: number): number {
  return Number.isFinite(value) ? Math.max(0, Math.min(2_147_483_647, Math.round(value))) : 0;
}

/** An ISO 8601 time the validation let through, as a Date; 400 for one that names no real instant (2026-02-30). */
export function parseTime(value: string, name: string): Date {
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw new DomainError('validation_failed', `${name} must be an ISO 8601 date or time`);
  return at;
}
