import { Logger } from '@nestjs/common';
import { createHash, timingSafeEqual } from 'node:crypto';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { DomainError } from '../common/domain-error';
import { ERRORS } from '../common/error-codes';

/**
 * The pools of the app: the ORM's (keys, metadata, chats), the data engine's (object tables) and the
 * data tools' (reader), and with a read replica, the data engine's two there.
 */
export type PoolName = 'orm' | 'data' | 'reader' | 'data_replica' | 'reader_replica';

/** The read replica as the data engine last saw it (DataPool.readReplica). */
export interface ReadReplicaStats {
  /** Replay lag, milliseconds; null when unknown (the replica is down or catching up after a start). */
  lagMs: number | null;
  /** Reads that went to the primary because of the replica, by reason, since start. */
  fallbacks: Readonly<Record<string, number>>;
}

export interface PoolStats {
  /** Connections open, idle or in use. */
  total: number;
  idle: number;
  /** Callers waiting for a connection. */
  waiting: number;
}

/** One queue of the job queue as scraped (JobQueue.stats, with this replica's failed attempts). */
export interface JobQueueMetrics {
  queue: string;
  queued: number;
  active: number;
  /** Jobs that failed for good and are kept. */
  failed: number;
  oldestQueuedSeconds: number;
  /** Failed attempts of this replica's workers since start. */
  failedAttempts: number;
}

/** The labels of one model call. */
export interface ModelCallObservation {
  agent?: string;
  model: string;
  /** `ok`, or the call's error code (`llm_timeout`, `llm_rate_limited`, ...). */
  outcome: string;
  seconds: number;
  usage?: { promptTokens: number; completionTokens: number };
}

/** The label of requests that matched no route: one value for every unknown URL. */
export const UNMATCHED_ROUTE = 'unmatched';

const PREFIX = 'datacopilot_';

/** Seconds: model calls take from a fraction of a second to minutes. */
const MODEL_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120];
/** Seconds: data tools answer in milliseconds; their timeout is seconds. */
const TOOL_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds: a woken worker claims within milliseconds; a full replica makes chats wait. */
const CLAIM_LAG_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** Longest label value kept; admins name agents and models, but a label stays a label. */
const MAX_LABEL_LENGTH = 100;

/**
 * The Prometheus metrics of one app instance: a registry of its own (tests run several apps in one
 * process, so nothing goes to prom-client's global registry) and typed instruments, each recorded in
 * the one place its event happens: the request log hook (HTTP), LlmService (model calls), the tool
 * middleware chain (tool calls) and the chat worker (runs, claim lag). Gauges that describe state
 * (chats by status, pools) are read when scraped, through sources their owners register.
 *
 * Label values come only from bounded sets: route patterns (never URLs), method and status, tool
 * names of the registry, agents and models that admins define, and error codes of the catalog.
 */
export class PrometheusService {
  private readonly logger = new Logger(PrometheusService.name);
  readonly registry = new Registry();

  private readonly recent = new RecentRate();
  private readonly httpRequests = new Counter({
    name: `${PREFIX}http_requests_total`,
    help: 'HTTP requests answered, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  private readonly httpDuration = new Histogram({
    name: `${PREFIX}http_request_duration_seconds`,
    help: 'Time to answer an HTTP request (an event stream: until it closed), by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  private readonly modelCalls = new Counter({
    name: `${PREFIX}llm_calls_total`,
    help: 'Model calls (each attempt), by agent, model and outcome (ok or the error code)',
    labelNames: ['agent', 'model', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly modelDuration = new Histogram({
    name: `${PREFIX}llm_call_duration_seconds`,
    help: 'Duration of a model call attempt, to its last streamed chunk, by agent, model and outcome',
    labelNames: ['agent', 'model', 'outcome'] as const,
    buckets: MODEL_BUCKETS,
    registers: [this.registry],
  });
  private readonly modelTokens = new Counter({
    name: `${PREFIX}llm_tokens_total`,
    help: 'Tokens the model endpoint reported, by agent, model and kind (prompt or completion)',
    labelNames: ['agent', 'model', 'kind'] as const,
    registers: [this.registry],
  });
  private readonly modelCallsInFlight = new Gauge({
    name: `${PREFIX}llm_calls_in_flight`,
    help: 'Model calls under way on this replica (waits between retries included)',
    registers: [this.registry],
  });
  private readonly modelCallsQueued = new Gauge({
    name: `${PREFIX}llm_calls_queued`,
    help: 'Model calls waiting for one of the LLM_MAX_CONCURRENCY slots of this replica',
    registers: [this.registry],
  });
  private readonly toolCalls = new Counter({
    name: `${PREFIX}tool_calls_total`,
    help: 'Tool calls that reached the middleware chain, by tool and outcome (ok or the error code)',
    labelNames: ['tool', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly toolDuration = new Histogram({
    name: `${PREFIX}tool_call_duration_seconds`,
    help: 'Duration of a tool call, middleware included, by tool and outcome',
    labelNames: ['tool', 'outcome'] as const,
    buckets: TOOL_BUCKETS,
    registers: [this.registry],
  });
  private readonly chatsInFlight = new Gauge({
    name: `${PREFIX}chat_worker_chats_in_flight`,
    help: "Durable chats this replica's worker is running",
    registers: [this.registry],
  });
  private readonly claimLag = new Histogram({
    name: `${PREFIX}chat_claim_lag_seconds`,
    help: 'Time from a durable chat becoming claimable (pending, its retry delay over) to a worker claiming it',
    buckets: CLAIM_LAG_BUCKETS,
    registers: [this.registry],
  });

  private chatStatusSource?: () => Promise<Record<string, number>>;
  private readonly poolSources = new Map<PoolName, () => Promise<PoolStats | undefined>>();
  private readReplicaSource?: () => ReadReplicaStats | undefined;

  private readonly chats: Gauge<'status'> = new Gauge({
    name: `${PREFIX}chats`,
    help: 'Durable chats by status (all replicas; read from the database when scraped)',
    labelNames: ['status'] as const,
    registers: [this.registry],
    collect: () => this.collectChats(),
  });
  private readonly poolConnections: Gauge<'pool' | 'state'> = new Gauge({
    name: `${PREFIX}pg_pool_connections`,
    help: 'Connections of a database pool by state: in_use, idle, and waiting (callers queued for one)',
    labelNames: ['pool', 'state'] as const,
    registers: [this.registry],
    collect: () => this.collectPools(),
  });

  private readonly readReplicaLag: Gauge = new Gauge({
    name: `${PREFIX}db_read_replica_lag_seconds`,
    help: 'Replay lag of the read replica (DATABASE_READ_URL) at its last check: 0 when caught up with the primary, NaN when unknown (down)',
    registers: [this.registry],
    collect: () => this.collectReplicaLag(),
  });
  private readonly readFallbacks: Counter<'reason'> = new Counter({
    name: `${PREFIX}db_read_fallbacks_total`,
    help: 'Data engine reads that went to the primary because of the read replica, by reason: lagging, down, or error (the replica failed the read)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
    collect: () => this.collectReadFallbacks(),
  });

  private jobQueueSource?: () => Promise<JobQueueMetrics[]>;
  /** One read of the job queue serves the three metrics of one scrape (they are collected at once). */
  private jobQueueRead?: { at: number; read: Promise<JobQueueMetrics[] | undefined> };
  private readonly jobQueueJobs: Gauge<'queue' | 'state'> = new Gauge({
    name: `${PREFIX}job_queue_jobs`,
    help: 'Jobs of the Postgres job queue by queue and state: queued (waiting to run, retries included), active, failed (for good, kept)',
    labelNames: ['queue', 'state'] as const,
    registers: [this.registry],
    collect: () => this.collectJobQueues(),
  });
  private readonly jobQueueOldest: Gauge<'queue'> = new Gauge({
    name: `${PREFIX}job_queue_oldest_job_age_seconds`,
    help: 'Age of the oldest job waiting to run, by queue (0: none waits)',
    labelNames: ['queue'] as const,
    registers: [this.registry],
    collect: () => this.collectJobQueueAges(),
  });
  private readonly jobAttemptFailures: Counter<'queue'> = new Counter({
    name: `${PREFIX}job_attempt_failures_total`,
    help: "Failed attempts of jobs on this replica's workers, by queue (each is retried with backoff until its limit)",
    labelNames: ['queue'] as const,
    registers: [this.registry],
    collect: () => this.collectJobAttemptFailures(),
  });
  private readonly webhookAttempts: Counter<'outcome'> = new Counter({
    name: `${PREFIX}webhook_attempts_total`,
    help: 'Webhook delivery attempts of this replica by outcome: ok (2xx), failed (an error, a timeout or another status)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  private readonly webhookDeliveries: Counter<'status'> = new Counter({
    name: `${PREFIX}webhook_deliveries_total`,
    help: 'Webhook deliveries settled on this replica by status: succeeded, failed (no attempt succeeded in time), skipped (no longer readable by the owner)',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });

  /** `token`: METRICS_TOKEN, when scrapes must present it. */
  constructor(private readonly token?: string) {}

  /** The text format's content type. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * Every metric in the text format: this app's, then the process's (Node's defaults). With
   * METRICS_TOKEN set, only for `Authorization: Bearer <METRICS_TOKEN>` (401 otherwise).
   */
  async scrape(authorization: string | undefined): Promise<string> {
    if (this.token !== undefined && !bearerMatches(authorization, this.token)) {
      throw new DomainError('unauthorized', 'The metrics need Authorization: Bearer <METRICS_TOKEN>');
    }
    const [app, process] = await Promise.all([this.registry.metrics(), processRegistry().metrics()]);
    return app + process;
  }

  observeHttpRequest(method: string, route: string | undefined, status: number, seconds: number): void {
    const labels = { method, route: route ?? UNMATCHED_ROUTE, status: String(status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
    if (route !== undefined && route.startsWith('/api/')) this.recent.count();
  }

  /** API requests this replica answered per second, over the last half second: how busy its front door is. */
  apiRequestsPerSecond(): number {
    return this.recent.perSecond();
  }

  /** Counts a model call as under way until the returned function is called. */
  modelCallStarted(): () => void {
    this.modelCallsInFlight.inc();
    return once(() => this.modelCallsInFlight.dec());
  }

  /** Counts a model call as waiting for a slot until the returned function is called. */
  modelCallQueued(): () => void {
    this.modelCallsQueued.inc();
    return once(() => this.modelCallsQueued.dec());
  }

  observeModelCall(call: ModelCallObservation): void {
    const labels = { agent: label(call.agent ?? 'none'), model: label(call.model), outcome: codeLabel(call.outcome) };
    this.modelCalls.inc(labels);
    this.modelDuration.observe(labels, call.seconds);
    if (call.usage) {
      const { agent, model } = labels;
      this.modelTokens.inc({ agent, model, kind: 'prompt' }, call.usage.promptTokens);
      this.modelTokens.inc({ agent, model, kind: 'completion' }, call.usage.completionTokens);
    }
  }

  /** `tool` must be a registered tool's name; `outcome` is `ok` or the result's error code. */
  observeToolCall(tool: string, outcome: string, seconds: number): void {
    const labels = { tool: label(tool), outcome: codeLabel(outcome) };
    this.toolCalls.inc(labels);
    this.toolDuration.observe(labels, seconds);
  }

  /** Counts a durable chat run as under way until the returned function is called. */
  chatRunStarted(): () => void {
    this.chatsInFlight.inc();
    return once(() => this.chatsInFlight.dec());
  }

  observeClaimLag(seconds: number): void {
    this.claimLag.observe(Math.max(0, seconds));
  }

  /** Where the chats-by-status gauge reads its numbers when scraped. */
  collectChatStatuses(source: () => Promise<Record<string, number>>): void {
    this.chatStatusSource = source;
  }

  /** Where the job queue's gauges read their numbers when scraped. */
  collectJobQueue(source: () => Promise<JobQueueMetrics[]>): void {
    this.jobQueueSource = source;
  }

  observeWebhookAttempt(ok: boolean): void {
    this.webhookAttempts.inc({ outcome: ok ? 'ok' : 'failed' });
  }

  observeWebhookDelivery(status: 'succeeded' | 'failed' | 'skipped'): void {
    this.webhookDeliveries.inc({ status });
  }

  /** Where a pool's gauge reads its numbers when scraped (undefined: the pool is not open yet). */
  collectPool(pool: PoolName, source: () => Promise<PoolStats | undefined>): void {
    this.poolSources.set(pool, source);
  }

  /** Where the read replica's gauges read their numbers when scraped (undefined: no read replica). */
  collectReadReplica(source: () => ReadReplicaStats | undefined): void {
    this.readReplicaSource = source;
  }

  private collectReplicaLag(): void {
    this.readReplicaLag.reset();
    const stats = this.readReplicaSource?.();
    if (stats) this.readReplicaLag.set(stats.lagMs === null ? NaN : stats.lagMs / 1000);
  }

  /** The job queue as read for this scrape (undefined: not readable now). */
  private readJobQueues(): Promise<JobQueueMetrics[] | undefined> {
    const now = Date.now();
    if (this.jobQueueRead && now - this.jobQueueRead.at < 1_000) return this.jobQueueRead.read;
    const source = this.jobQueueSource;
    const read = source
      ? source().catch((error: Error) => {
          // A scrape still answers when the database is slow or gone: without these metrics.
          this.logger.warn({ msg: 'could not read the job queue', error: error.message });
          return undefined;
        })
      : Promise.resolve(undefined);
    this.jobQueueRead = { at: now, read };
    return read;
  }

  private async collectJobQueues(): Promise<void> {
    const queues = await this.readJobQueues();
    this.jobQueueJobs.reset();
    for (const q of queues ?? []) {
      this.jobQueueJobs.set({ queue: q.queue, state: 'queued' }, q.queued);
      this.jobQueueJobs.set({ queue: q.queue, state: 'active' }, q.active);
      this.jobQueueJobs.set({ queue: q.queue, state: 'failed' }, q.failed);
    }
  }

  private async collectJobQueueAges(): Promise<void> {
    const queues = await this.readJobQueues();
    this.jobQueueOldest.reset();
    for (const q of queues ?? []) this.jobQueueOldest.set({ queue: q.queue }, q.oldestQueuedSeconds);
  }

  /** The counter is kept by the queue's workers: set from their count when scraped. */
  private async collectJobAttemptFailures(): Promise<void> {
    const queues = await this.readJobQueues();
    this.jobAttemptFailures.reset();
    for (const q of queues ?? []) this.jobAttemptFailures.inc({ queue: q.queue }, q.failedAttempts);
  }

  /** The counter is kept by the data engine: set from its count when scraped. */
  private collectReadFallbacks(): void {
    this.readFallbacks.reset();
    const stats = this.readReplicaSource?.();
    for (const [reason, count] of Object.entries(stats?.fallbacks ?? {})) this.readFallbacks.inc({ reason }, count);
  }

  private async collectChats(): Promise<void> {
    this.chats.reset();
    if (!this.chatStatusSource) return;
    let counts: Record<string, number>;
    try {
      counts = await this.chatStatusSource();
    } catch (error) {
      // A scrape still answers when the database is slow or gone: without this gauge.
      this.logger.warn({ msg: 'could not read chats by status', error: (error as Error).message });
      return;
    }
    for (const [status, count] of Object.entries(counts)) this.chats.set({ status }, count);
  }

  private async collectPools(): Promise<void> {
    this.poolConnections.reset();
    for (const [pool, source] of this.poolSources) {
      const stats = await source().catch(() => undefined);
      if (!stats) continue;
      this.poolConnections.set({ pool, state: 'in_use' }, stats.total - stats.idle);
      this.poolConnections.set({ pool, state: 'idle' }, stats.idle);
      this.poolConnections.set({ pool, state: 'waiting' }, stats.waiting);
    }
  }
}

let processMetrics: Registry | undefined;

/**
 * Node's default metrics (CPU, memory, event loop lag, GC, handles) in a registry of their own, made
 * once per process: they describe the process, and each collection installs observers that are never
 * removed, so several apps in one process share them.
 */
function processRegistry(): Registry {
  if (!processMetrics) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  return processMetrics;
}

/** Compares digests, so neither the token's content nor its length shows in the time taken. */
function bearerMatches(authorization: string | undefined, token: string): boolean {
  const match = /^Bearer (.+)$/i.exec(authorization ?? '');
  if (!match) return false;
  return timingSafeEqual(digest(match[1]), digest(token));
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

function label(value: string): string {
  return value.length > MAX_LABEL_LENGTH ? value.slice(0, MAX_LABEL_LENGTH) : value;
}

/** `ok` or a catalog error code; anything else (a tool's own code) counts as `error`. */
function codeLabel(outcome: string): string {
  return outcome === 'ok' || Object.hasOwn(ERRORS, outcome) ? outcome : 'error';
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}

/** Events counted in 100 ms slots over the last half second (a ring, no timers): a rate of now, cheap to count. */
export class RecentRate {
  private static readonly SLOT_MS = 100;
  private static readonly SLOTS = 5;
  private readonly slots = new Array<number>(RecentRate.SLOTS).fill(0);
  private current: number;

  constructor(private readonly now: () => number = () => performance.now()) {
    this.current = Math.floor(now() / RecentRate.SLOT_MS);
  }

  count(): void {
    this.slots[this.advance() % RecentRate.SLOTS]++;
  }

  perSecond(): number {
    this.advance();
    return (this.slots.reduce((sum, n) => sum + n, 0) * 1000) / (RecentRate.SLOT_MS * RecentRate.SLOTS);
  }

  /** Clears the slots passed since the last count; the current slot. */
  private advance(): number {
    const slot = Math.floor(this.now() / RecentRate.SLOT_MS);
    for (let passed = this.current + 1; passed <= slot && passed <= this.current + RecentRate.SLOTS; passed++) {
      this.slots[passed % RecentRate.SLOTS] = 0;
    }
    this.current = Math.max(this.current, slot);
    return this.current;
  }
}
