import { BeforeApplicationShutdown, Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { ACCESS_CHANGED } from '../auth/access-changed';
import { BatchedWriter } from '../database/batched-writer';
import { PgPubSub } from '../database/pg-pubsub.service';
import { ReplicatedCache } from '../database/replicated-cache';
import { ApiKeyService } from '../auth/api-key.service';
import { parseTime } from '../common/query-params';
import { MAX_USAGE_ROWS, UsageQueryDto, UsageReportResponse } from './usage.dto';
import { UsageRepository } from './usage.repository';

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
  /** When the call ended (default: when it is recorded). */
  at?: Date;
}

/**
 * Token quotas and usage. Every model call is a `usage` row, written in batches (one statement for
 * up to 200 calls, at most 100 ms later: a chat's turn does not wait on it). Before each call the
 * quota check, when a quota applies to the key or the agent at all, writes this replica's pending
 * rows and sums today's (UTC) rows of the key and of the agent in one statement on their indexes.
 * Summing the table instead of counting in memory keeps the quota exact across replicas; what it
 * allows past the limit is at most the calls in flight (and, on other replicas, the last 100 ms).
 * Without a quota it costs nothing: a key's own `tokensPerDay` is kept per replica until keys change.
 */
@Injectable()
export class UsageService implements BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly calls = new BatchedWriter<UsageEntry>((batch) => this.insert(batch), {
    maxBatch: 200,
    delayMs: 100,
    maxBuffered: 50_000,
    what: 'usage rows of model calls',
  });
  /** Each key's `tokens_per_day` (null: the default applies); cleared on every replica when keys change. */
  private readonly keyQuotas: ReplicatedCache<number | null>;

  constructor(
    private readonly repo: UsageRepository,
    private readonly apiKeys: ApiKeyService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    pubsub: PgPubSub,
  ) {
    this.keyQuotas = new ReplicatedCache(pubsub, ACCESS_CHANGED);
  }

  /** 429 `quota_exceeded` (Retry-After: the next UTC midnight) when the key or the agent has spent its tokens of the day. */
  async assertWithinQuota(scope: UsageScope, now = new Date()): Promise<void> {
    const keyId = isUuid(scope.keyId) ? scope.keyId : null;
    const keyQuota = (keyId ? await this.keyQuota(keyId) : null) ?? this.config.quotaTokensPerKeyDay ?? null;
    const agentQuota = scope.agent ? (this.config.quotaTokensPerAgentDay ?? null) : null;
    if ((keyQuota === null || !keyId) && agentQuota === null) return;
    await this.calls.flush();
    const dayStart = startOfUtcDay(now);
    const row = await this.repo.tokensSince(
      dayStart,
      keyId && keyQuota !== null ? keyId : null,
      agentQuota !== null ? (scope.agent ?? null) : null,
    );
    const retryAfterSeconds = Math.max(1, Math.ceil((dayStart.getTime() + DAY_MS - now.getTime()) / 1000));
    const resetsAt = new Date(dayStart.getTime() + DAY_MS).toISOString();
    if (keyId && keyQuota !== null && Number(row.keyUsed) >= keyQuota) {
      throw new DomainError(
        'quota_exceeded',
        `This API key has used its ${keyQuota} model tokens of the day (UTC); the quota resets at ${resetsAt}`,
        { scope: 'key', quota: keyQuota, used: Number(row.keyUsed), resetsAt },
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

  /** Queues one model call's usage; it is written with the next batch. */
  record(entry: UsageEntry): void {
    this.calls.push({ ...entry, at: entry.at ?? new Date() });
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.calls.flush();
  }

  /** Again after every worker stopped, before the database connection closes. */
  async onApplicationShutdown(): Promise<void> {
    await this.calls.close();
  }

  private keyQuota(keyId: string): Promise<number | null> {
    return this.keyQuotas.get(keyId, () => this.apiKeys.tokensPerDay(keyId));
  }

  private async insert(batch: UsageEntry[]): Promise<void> {
    const rows = batch.map((entry) => ({
      at: (entry.at ?? new Date()).toISOString(),
      key_id: isUuid(entry.keyId) ? entry.keyId : null,
      agent: entry.agent ?? null,
      chat_id: isUuid(entry.chatId) ? entry.chatId : null,
      model: entry.model.slice(0, 200),
      prompt_tokens: clampInt(entry.promptTokens),
      completion_tokens: clampInt(entry.completionTokens),
      total_tokens: clampInt(entry.totalTokens),
      duration_ms: clampInt(entry.durationMs),
      outcome: entry.outcome.slice(0, 100),
    }));
    await this.repo.insert(rows);
  }

  /** Totals per key, agent or UTC day; a member key gets its own calls only, whatever keyId it names. */
  async report(caller: Caller, query: UsageQueryDto): Promise<UsageReportResponse> {
    await this.calls.flush();
    const keyId = caller.role === 'admin' ? query.keyId : caller.keyId;
    const rows = await this.repo.totals(
      query.groupBy ?? 'key',
      {
        keyId: keyId === undefined ? undefined : isUuid(keyId) ? keyId : null,
        agent: query.agent,
        from: query.from === undefined ? undefined : parseTime(query.from, 'from'),
        to: query.to === undefined ? undefined : parseTime(query.to, 'to'),
      },
      MAX_USAGE_ROWS,
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
