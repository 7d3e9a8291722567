import { resolve } from 'node:path';

/** Bounds of LLM_CONTEXT_TOKENS and of an agent's model.contextTokens. */
export const CONTEXT_TOKENS_MIN = 1_000;
export const CONTEXT_TOKENS_MAX = 10_000_000;

/**
 * Typed configuration, read from the environment once at start.
 * A bad value stops the start with a message naming the variable.
 */
export interface AppConfig {
  port: number;
  host: string;
  /** External PostgreSQL; undefined means "start the embedded Postgres under dataDir". */
  databaseUrl?: string;
  /**
   * A streaming replica of databaseUrl for the data engine's reads (records, search, value counts,
   * aggregates, metrics, exports, data tools); undefined: every read runs on the primary.
   */
  databaseReadUrl?: string;
  /** Replay lag of the read replica above which its reads go to the primary until it catches up, milliseconds. */
  readMaxLagMs: number;
  dataDir: string;
  embeddedPostgresPort: number;
  adminApiKey?: string;
  openaiApiKey?: string;
  openaiBaseUrl?: string;
  llmModel: string;
  /** Send freeform client tools as function tools with one string parameter (for endpoints without custom tools). */
  llmCustomToolsAsFunctions: boolean;
  /** Request field for the completion limit: OpenAI's reasoning models want max_completion_tokens, most others max_tokens. */
  llmMaxTokensParam: 'max_tokens' | 'max_completion_tokens';
  /** Retries of a failed model call (rate limits, 5xx, connection errors, timeouts), with backoff. */
  llmMaxRetries: number;
  /**
   * Timeout of one model call, milliseconds: a whole non-streamed answer, or a stream's response
   * headers (its chunks are watched by the two limits below).
   */
  llmTimeoutMs: number;
  /** A streamed model call that sends no chunk for this long after the request is aborted and retried, milliseconds. */
  llmFirstChunkTimeoutMs: number;
  /** A streamed model call that sends nothing for this long between two chunks is aborted and retried, milliseconds. */
  llmStallTimeoutMs: number;
  /** The longest wait a provider's Retry-After can impose before a retry (a longer one is cut to this), milliseconds. */
  llmRetryAfterMaxMs: number;
  /** Model calls this replica sends at the same time, every front door together; the others wait for a slot. */
  llmMaxConcurrency: number;
  /** Most prompt tokens one model call may send, for agents without model.contextTokens. */
  llmContextTokens: number;
  /** Durable chats: whether this replica runs the chat worker. */
  chatWorkerEnabled: boolean;
  /** Chats one replica runs at the same time (a chat waiting on the model holds memory only); default 2 × llmMaxConcurrency. */
  chatWorkerConcurrency: number;
  /** Data tool calls of durable chats that may hold data pool connections at once (below the pool's size). */
  chatToolConcurrency: number;
  /** Safety-net poll for pending chats (NOTIFY wakes workers at once), milliseconds. */
  chatPollIntervalMs: number;
  /** How long a replica gathers its commits (chat events, record changes) into one announcement to the others, milliseconds. */
  eventsAnnounceWindowMs: number;
  /** How often a replica reads chat events and record changes without an announcement (one lost with its replica), milliseconds. */
  eventsPollIntervalMs: number;
  /** How often a replica refreshes the heartbeat of its running chats, milliseconds. */
  chatHeartbeatIntervalMs: number;
  /** A running chat whose heartbeat is older than this is taken back to pending, milliseconds. */
  chatStaleAfterMs: number;
  /** How long a chat waits in requires_action for tool results, milliseconds. */
  chatActionTimeoutMs: number;
  /** Attempts of a turn whose model call fails with a retryable error. */
  chatMaxAttempts: number;
  /** Durable chats of one owner that may be pending or running at once (beyond: 429). */
  chatMaxInFlightPerKey: number;
  /** Keep-alive comment interval of SSE streams, milliseconds. */
  sseKeepAliveMs: number;
  /** Event streams one API key may hold open on one replica (beyond: 429). */
  sseMaxStreamsPerKey: number;
  /** Days the change feed keeps its events; a cursor older than that is 410 cursor_expired. */
  changeRetentionDays: number;
  /** Days a deleted record stays in the trash before it is purged. */
  trashRetentionDays: number;
  /** Days record history (the versions of each record) is kept. */
  historyRetentionDays: number;
  /** Time a client has to send a whole request (headers and body), milliseconds; streamed responses are not limited. */
  httpRequestTimeoutMs: number;
  seed: boolean;
  /** Serve the browser playground (built page and its assets) at `/`. */
  playground: boolean;
  logLevel: 'debug' | 'info' | 'warn' | 'error' | 'silent';
  /** `json`: one JSON object per line; `pretty`: the same lines made readable for a terminal. */
  logFormat: 'json' | 'pretty';
  /** Per-call timeout of a tool, milliseconds. */
  toolTimeoutMs: number;
  /** statement_timeout of every data engine statement (records API, aggregates, data tools), milliseconds. */
  queryTimeoutMs: number;
  /**
   * Records an offset page's `total` counts exactly at most (reading that many rows at most); beyond,
   * `total` is the planner's estimate (`totalExact: false`).
   */
  recordsCountCap: number;
  /** How long a data engine call waits for a free connection before it answers database_busy, milliseconds. */
  dbAcquireTimeoutMs: number;
  /** Connections of the data engine's own pool. */
  dataPoolSize: number;
  /**
   * Share (0..1] of each data pool (records, data tools, durable chats' tool slots) that one API key may
   * hold at once, at least one connection; its other calls wait for one of its own.
   */
  dataPoolKeyShare: number;
  /** How long a statement of the ORM's pool (API keys, metadata, chats, jobs) waits for a free connection before it answers database_busy, milliseconds. */
  ormAcquireTimeoutMs: number;
  /** Browser origins allowed to call the API: `*` for any, a list of origins, or undefined for none (no CORS headers). */
  corsOrigins?: '*' | string[];
  /** How long a write proposal's approval token stays valid, seconds (APPROVAL_TTL_S). */
  approvalTtlS: number;
  /**
   * The HMAC key of approval tokens (APPROVAL_SECRET, at least 32 characters); undefined: one generated once into
   * DATA_DIR (every replica of a deployment must then share APPROVAL_SECRET instead).
   */
  approvalSecret?: string;
  /** How long a stream token may be used to open an event stream, milliseconds. */
  streamTokenTtlMs: number;
  /** Unexpired stream tokens one API key may hold at once (beyond: 429). */
  streamTokensPerKey: number;
  /** Largest CSV body one import may send, in bytes (counted as it streams; beyond: 413). */
  importMaxBytes: number;
  /** An import waiting for more of its CSV body that gets no byte for this long fails (upload_stalled), milliseconds. */
  importStallTimeoutMs: number;
  /** CSV exports one replica streams at once, each holding a data pool connection (beyond: 429). */
  exportConcurrency: number;
  /** CSV exports one API key may stream at once on one replica (beyond: 429). */
  exportMaxPerKey: number;
  /** An export whose client takes no data for this long is ended (its transaction rolled back), milliseconds. */
  exportStallTimeoutMs: number;
  /** An export still streaming after this long is cut short (its transaction rolled back), milliseconds. */
  exportMaxDurationMs: number;
  /** When set, GET /metrics needs `Authorization: Bearer <metricsToken>`; unset, it is public. */
  metricsToken?: string;
  /** Model tokens one API key may use per UTC day (every agent together); undefined: unlimited. A key's tokensPerDay overrides it. */
  quotaTokensPerKeyDay?: number;
  /** Model tokens one agent may use per UTC day (every key together); undefined: unlimited. */
  quotaTokensPerAgentDay?: number;
  /** Webhook targets on private, loopback and link-local addresses are allowed (tests, internal networks). */
  webhookAllowPrivate: boolean;
  /** Attempts of one webhook delivery before it is `failed` (it also fails once it is WEBHOOK_MAX_AGE_HOURS old). */
  webhookMaxAttempts: number;
  /** A delivery still not delivered after this long is `failed`, hours. */
  webhookMaxAgeHours: number;
  /** Time one delivery attempt has for the connection, the request and the response, milliseconds. */
  webhookTimeoutMs: number;
  /** Delay before the first retry of a failed attempt, doubled (with jitter) for each next one, seconds. */
  webhookRetryDelayS: number;
  /** The longest delay between two attempts, seconds. */
  webhookRetryDelayMaxS: number;
  /** A webhook whose every attempt failed for this long is disabled, hours. */
  webhookDisableAfterHours: number;
  /** Deliveries of one owner's webhooks each replica has in flight at once (below JOB_CONCURRENCY): one key cannot starve the others. */
  webhookOwnerConcurrency: number;
  /** Where schedule emails are sent (`smtp://user:pass@host:587`, `smtps://...`); unset: email deliveries fail with `email_not_configured`. */
  smtpUrl?: string;
  /** The From address of schedule emails. */
  smtpFrom: string;
  /** How often each replica looks for schedules whose next tick is due, milliseconds. */
  schedulePollIntervalMs: number;
  /** The shortest interval (`every`) a schedule may have, seconds. */
  scheduleMinIntervalS: number;
  /** How long a scheduled question waits for its chat's answer before the run fails, seconds. */
  scheduleQuestionTimeoutS: number;
  /** Jobs of each queue this replica works at once (each a worker of its own that polls when idle). */
  jobConcurrency: number;
  /** How often an idle worker of the job queue looks for jobs (a new job's NOTIFY wakes it sooner), milliseconds. */
  jobPollIntervalMs: number;
  /**
   * A job's lease beyond the longest its work may take (a delivery attempt: WEBHOOK_TIMEOUT_MS; a question
   * run: SCHEDULE_QUESTION_TIMEOUT_S, plus the margin twice), seconds: a job active longer lost its replica
   * and is retried.
   */
  jobLeaseMarginS: number;
  /** How often each replica's queue looks for jobs whose lease ended (and refreshes its counts), seconds. */
  jobSuperviseIntervalS: number;
  /** Requests one member API key may make per minute (admin keys are not limited); 0: no limit. */
  rateLimitPerMinute: number;
  /** Requests with a wrong API key or stream token one client address may make per minute before it gets 429; 0: no limit. */
  authFailuresPerMinute: number;
  /** Identity providers whose `Bearer` JWTs authenticate end users beside API keys; empty: API keys only. */
  oidcIssuers: OidcIssuerConfig[];
  /** Least time between two JWKS fetches of one issuer made for an unknown `kid`, milliseconds. */
  oidcJwksRefreshMs: number;
  /** The playground's "Sign in with the identity provider" (PLAYGROUND_OIDC_CLIENT_ID); undefined: keys only. */
  playgroundSignIn?: PlaygroundSignInConfig;
}

/** A public OAuth client of the (first) issuer, for the playground's authorization code flow with PKCE. */
export interface PlaygroundSignInConfig {
  /** The client id registered at the provider (a public client: no secret, PKCE). */
  clientId: string;
  /** The issuer it signs in with: AUTH_OIDC_ISSUER, or the first of AUTH_OIDC_ISSUERS. */
  issuer: string;
  /** The API's audience there, asked for as the token's resource (and `audience`). */
  audience: string;
  /** The scopes asked for (PLAYGROUND_OIDC_SCOPES, `openid` always among them). */
  scopes: string[];
}

/** One trusted token issuer (AUTH_OIDC_ISSUER or an entry of AUTH_OIDC_ISSUERS). */
export interface OidcIssuerConfig {
  /** Exactly the `iss` its tokens carry. */
  issuer: string;
  /** The `aud` a token must carry to be accepted here. */
  audience: string;
  /** Its JWKS; undefined: read from the issuer's OpenID discovery document. */
  jwksUrl?: string;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`Invalid configuration: ${variable} ${message}`);
  }
}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = str(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

/** A number above 0 and at most 1, like 0.5. */
function fraction(env: Env, name: string, fallback: number): number {
  const raw = str(env, name);
  if (raw === undefined) return fallback;
  const value = /^[01]?(\.\d+)?$/.test(raw) ? Number(raw) : NaN;
  if (!(value > 0 && value <= 1)) throw new ConfigError(name, `must be a number above 0 and at most 1, like 0.5, got "${raw}"`);
  return value;
}

/** A whole number, or undefined when the variable is unset. */
function optionalInt(env: Env, name: string, min: number, max: number): number | undefined {
  return str(env, name) === undefined ? undefined : int(env, name, 0, min, max);
}

/** A secret of at least `minLength` characters, or undefined when unset. */
function secret(env: Env, name: string, minLength: number): string | undefined {
  const raw = str(env, name);
  if (raw !== undefined && raw.length < minLength) throw new ConfigError(name, `must be at least ${minLength} characters long`);
  return raw;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = str(env, name)?.toLowerCase();
  if (raw === undefined) return fallback;
  if (['true', '1', 'yes', 'on'].includes(raw)) return true;
  if (['false', '0', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = str(env, name);
  if (raw === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, 'must be a URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use ${protocols.join(' or ')}, got "${parsed.protocol}"`);
  }
  return raw;
}

function oneOf<const T extends readonly string[]>(env: Env, name: string, values: T, fallback: T[number]): T[number] {
  const raw = str(env, name);
  if (raw === undefined) return fallback;
  if (!values.includes(raw)) throw new ConfigError(name, `must be one of ${values.join(', ')}, got "${raw}"`);
  return raw;
}

/**
 * `*`, or comma-separated origins as browsers send them in `Origin`: scheme, host and an optional
 * port, nothing else. A path or a trailing slash would never match a browser's Origin, so it is refused
 * rather than silently matching nothing.
 */
function origins(env: Env, name: string): '*' | string[] | undefined {
  const raw = str(env, name);
  if (raw === undefined) return undefined;
  const items = raw
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  if (items.includes('*')) {
    if (items.length > 1) throw new ConfigError(name, 'must be either * or a list of origins, not both');
    return '*';
  }
  const result = items.map((item) => {
    let parsed: URL | undefined;
    try {
      parsed = new URL(item);
    } catch {
      parsed = undefined;
    }
    if (!parsed || !['http:', 'https:'].includes(parsed.protocol) || parsed.origin !== item.toLowerCase()) {
      throw new ConfigError(
        name,
        `must be * or comma-separated origins like https://app.example.com (http or https, host, optional port, no path), got "${item}"`,
      );
    }
    return parsed.origin;
  });
  if (!result.length) throw new ConfigError(name, 'must name at least one origin, or *');
  return [...new Set(result)];
}

/** Whether an http:// URL may be trusted: only on this machine, where nobody can tamper with it in transit. */
function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/** An issuer or JWKS URL: https, or http on a loopback address (tests, local development). */
function identityUrl(name: string, raw: unknown, what: string): string {
  if (typeof raw !== 'string' || !raw.trim()) throw new ConfigError(name, `needs ${what} as a URL`);
  let parsed: URL;
  try {
    parsed = new URL(raw.trim());
  } catch {
    throw new ConfigError(name, `${what} must be a URL, got "${raw}"`);
  }
  const ok = parsed.protocol === 'https:' || (parsed.protocol === 'http:' && isLoopback(parsed.hostname));
  if (!ok) throw new ConfigError(name, `${what} must be an https:// URL (http:// only on a loopback address), got "${raw}"`);
  return raw.trim();
}

function oidcIssuer(name: string, entry: { issuer?: unknown; audience?: unknown; jwksUrl?: unknown }): OidcIssuerConfig {
  const issuer = identityUrl(name, entry.issuer, 'an issuer');
  // As OpenID Connect Discovery requires; a `#` would also make a user's owner (`oidc:<issuer>#<subject>`) ambiguous.
  if (/[?#\s]/.test(issuer)) throw new ConfigError(name, `an issuer has no query, fragment or spaces, got "${issuer}"`);
  // Without an audience any token of the issuer, minted for any other application, would be accepted.
  if (typeof entry.audience !== 'string' || !entry.audience.trim()) {
    throw new ConfigError(name, `needs the audience tokens for this server carry (issuer ${issuer})`);
  }
  const jwksUrl = entry.jwksUrl === undefined || entry.jwksUrl === null ? undefined : identityUrl(name, entry.jwksUrl, 'jwksUrl');
  return { issuer, audience: entry.audience.trim(), ...(jwksUrl ? { jwksUrl } : {}) };
}

/**
 * AUTH_OIDC_ISSUER with AUTH_OIDC_AUDIENCE (and AUTH_OIDC_JWKS_URL), or AUTH_OIDC_ISSUERS as a JSON list of
 * `{ "issuer", "audience", "jwksUrl"? }`; not both, so which one applies is never a guess.
 */
function oidcIssuers(env: Env): OidcIssuerConfig[] {
  const single = str(env, 'AUTH_OIDC_ISSUER');
  const list = str(env, 'AUTH_OIDC_ISSUERS');
  if (single !== undefined && list !== undefined) {
    throw new ConfigError('AUTH_OIDC_ISSUERS', 'and AUTH_OIDC_ISSUER are both set: list every issuer in AUTH_OIDC_ISSUERS');
  }
  if (single !== undefined) {
    const audience = str(env, 'AUTH_OIDC_AUDIENCE');
    if (audience === undefined) throw new ConfigError('AUTH_OIDC_AUDIENCE', 'must be set with AUTH_OIDC_ISSUER');
    return [oidcIssuer('AUTH_OIDC_ISSUER', { issuer: single, audience, jwksUrl: str(env, 'AUTH_OIDC_JWKS_URL') })];
  }
  for (const orphan of ['AUTH_OIDC_AUDIENCE', 'AUTH_OIDC_JWKS_URL']) {
    if (str(env, orphan) !== undefined) throw new ConfigError(orphan, 'is set without AUTH_OIDC_ISSUER');
  }
  if (list === undefined) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(list);
  } catch {
    throw new ConfigError('AUTH_OIDC_ISSUERS', 'must be a JSON list like [{"issuer": "https://…", "audience": "…"}]');
  }
  if (!Array.isArray(parsed) || !parsed.length || parsed.some((e) => !e || typeof e !== 'object' || Array.isArray(e))) {
    throw new ConfigError('AUTH_OIDC_ISSUERS', 'must be a non-empty JSON list of {"issuer", "audience", "jwksUrl"?} objects');
  }
  const issuers = (parsed as Record<string, unknown>[]).map((entry) => oidcIssuer('AUTH_OIDC_ISSUERS', entry));
  const seen = new Set<string>();
  for (const { issuer } of issuers) {
    if (seen.has(issuer)) throw new ConfigError('AUTH_OIDC_ISSUERS', `lists ${issuer} twice`);
    seen.add(issuer);
  }
  return issuers;
}

/**
 * PLAYGROUND_OIDC_CLIENT_ID (+ PLAYGROUND_OIDC_SCOPES): the playground signs in with the first configured
 * issuer as this public client. It needs an issuer and the playground itself.
 */
function playgroundSignIn(env: Env, issuers: OidcIssuerConfig[], playground: boolean): PlaygroundSignInConfig | undefined {
  const clientId = str(env, 'PLAYGROUND_OIDC_CLIENT_ID');
  const rawScopes = str(env, 'PLAYGROUND_OIDC_SCOPES');
  if (clientId === undefined) {
    if (rawScopes !== undefined) throw new ConfigError('PLAYGROUND_OIDC_SCOPES', 'is set without PLAYGROUND_OIDC_CLIENT_ID');
    return undefined;
  }
  if (clientId.length > 255 || !/^[\x21-\x7e]+$/.test(clientId)) {
    throw new ConfigError('PLAYGROUND_OIDC_CLIENT_ID', 'must be a client id of at most 255 printable characters, no spaces');
  }
  if (!issuers.length) {
    throw new ConfigError('PLAYGROUND_OIDC_CLIENT_ID', 'needs an identity provider: set AUTH_OIDC_ISSUER (or AUTH_OIDC_ISSUERS)');
  }
  if (!playground) throw new ConfigError('PLAYGROUND_OIDC_CLIENT_ID', 'is set but PLAYGROUND is false');
  const scopes = (rawScopes ?? 'openid').split(/\s+/).filter(Boolean);
  if (scopes.some((scope) => scope.length > 200 || !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(scope)) || scopes.length > 20) {
    throw new ConfigError('PLAYGROUND_OIDC_SCOPES', 'must be up to 20 OAuth scopes separated by spaces');
  }
  if (!scopes.includes('openid')) scopes.unshift('openid');
  const [{ issuer, audience }] = issuers;
  return { clientId, issuer, audience, scopes };
}

const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;

/** Builds and validates the configuration; throws ConfigError naming the first bad variable. */
export function loadConfig(env: Env = process.env): AppConfig {
  const logLevel = (str(env, 'LOG_LEVEL') ?? 'info').toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  }
  // Any value becomes an admin key with exactly that secret (a short one is warned about at start).
  const adminApiKey = str(env, 'ADMIN_API_KEY');
  const dataPoolSize = int(env, 'DATA_POOL_SIZE', 10, 1, 1_000);
  const llmMaxConcurrency = int(env, 'LLM_MAX_CONCURRENCY', 256, 1, 100_000);
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const databaseReadUrl = url(env, 'DATABASE_READ_URL', ['postgres:', 'postgresql:']);
  if (databaseReadUrl !== undefined && databaseUrl === undefined) {
    throw new ConfigError('DATABASE_READ_URL', 'names a streaming replica of DATABASE_URL: set DATABASE_URL too');
  }
  const playground = bool(env, 'PLAYGROUND', true);
  const issuers = oidcIssuers(env);
  return {
    port: int(env, 'PORT', 3000, 0, 65535),
    host: str(env, 'HOST') ?? '127.0.0.1',
    databaseUrl,
    databaseReadUrl,
    readMaxLagMs: int(env, 'READ_MAX_LAG_MS', 2_000, 0, 600_000),
    dataDir: resolve(str(env, 'DATA_DIR') ?? './.data'),
    embeddedPostgresPort: int(env, 'EMBEDDED_POSTGRES_PORT', 54329, 1, 65535),
    adminApiKey,
    openaiApiKey: str(env, 'OPENAI_API_KEY'),
    openaiBaseUrl: url(env, 'OPENAI_BASE_URL', ['http:', 'https:']),
    llmModel: str(env, 'LLM_MODEL') ?? 'gpt-4o-mini',
    llmCustomToolsAsFunctions: bool(env, 'LLM_CUSTOM_TOOLS_AS_FUNCTIONS', false),
    llmMaxTokensParam: oneOf(env, 'LLM_MAX_TOKENS_PARAM', ['max_tokens', 'max_completion_tokens'] as const, 'max_tokens'),
    llmMaxRetries: int(env, 'LLM_MAX_RETRIES', 2, 0, 10),
    llmTimeoutMs: int(env, 'LLM_TIMEOUT_MS', 120_000, 1_000, 3_600_000),
    llmFirstChunkTimeoutMs: int(env, 'LLM_FIRST_CHUNK_TIMEOUT_MS', 60_000, 100, 3_600_000),
    llmStallTimeoutMs: int(env, 'LLM_STALL_TIMEOUT_MS', 60_000, 100, 3_600_000),
    llmRetryAfterMaxMs: int(env, 'LLM_RETRY_AFTER_MAX_MS', 30_000, 0, 600_000),
    llmMaxConcurrency,
    // The 128k-token window of LLM_MODEL's default (gpt-4o-mini, gpt-4o) less 8k for the answer and the estimate's slack.
    llmContextTokens: int(env, 'LLM_CONTEXT_TOKENS', 120_000, CONTEXT_TOKENS_MIN, CONTEXT_TOKENS_MAX),
    chatWorkerEnabled: bool(env, 'CHAT_WORKER_ENABLED', true),
    // Twice the model slots by default: a chat in flight beyond what they serve only waits, holding its memory
    // (with the conversation, its model request and results), where a pending one waits in the table for free.
    chatWorkerConcurrency: int(env, 'CHAT_WORKER_CONCURRENCY', 2 * llmMaxConcurrency, 1, 100_000),
    // Half the data pool by default: REST and MCP data calls always keep the other half.
    chatToolConcurrency: int(env, 'CHAT_TOOL_CONCURRENCY', Math.max(1, Math.floor(dataPoolSize / 2)), 1, dataPoolSize),
    chatPollIntervalMs: int(env, 'CHAT_POLL_INTERVAL_MS', 5_000, 50, 600_000),
    eventsAnnounceWindowMs: int(env, 'EVENTS_ANNOUNCE_WINDOW_MS', 5, 0, 600_000),
    eventsPollIntervalMs: int(env, 'EVENTS_POLL_INTERVAL_MS', 2_000, 50, 600_000),
    chatHeartbeatIntervalMs: int(env, 'CHAT_HEARTBEAT_INTERVAL_MS', 5_000, 50, 600_000),
    chatStaleAfterMs: int(env, 'CHAT_STALE_AFTER_MS', 30_000, 100, 3_600_000),
    chatActionTimeoutMs: int(env, 'CHAT_ACTION_TIMEOUT_MS', 600_000, 100, 86_400_000),
    chatMaxAttempts: int(env, 'CHAT_MAX_ATTEMPTS', 3, 1, 20),
    chatMaxInFlightPerKey: int(env, 'CHAT_MAX_IN_FLIGHT_PER_KEY', 32, 1, 100_000),
    sseKeepAliveMs: int(env, 'SSE_KEEPALIVE_MS', 15_000, 100, 600_000),
    sseMaxStreamsPerKey: int(env, 'SSE_MAX_STREAMS_PER_KEY', 20, 1, 100_000),
    changeRetentionDays: int(env, 'CHANGE_RETENTION_DAYS', 7, 1, 3_650),
    trashRetentionDays: int(env, 'TRASH_RETENTION_DAYS', 30, 1, 3_650),
    historyRetentionDays: int(env, 'HISTORY_RETENTION_DAYS', 365, 1, 36_500),
    httpRequestTimeoutMs: int(env, 'HTTP_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000),
    seed: bool(env, 'SEED', true),
    playground,
    logLevel: logLevel as AppConfig['logLevel'],
    logFormat: oneOf(env, 'LOG_FORMAT', ['json', 'pretty'] as const, 'json'),
    toolTimeoutMs: int(env, 'TOOL_TIMEOUT_MS', 10_000, 100, 600_000),
    queryTimeoutMs: int(env, queryTimeoutVariable(env), 5_000, 100, 600_000),
    recordsCountCap: int(env, 'RECORDS_COUNT_CAP', 10_000, 0, 100_000_000),
    dbAcquireTimeoutMs: int(env, 'DB_ACQUIRE_TIMEOUT_MS', 2_000, 10, 60_000),
    dataPoolSize,
    dataPoolKeyShare: fraction(env, 'DATA_POOL_KEY_SHARE', 0.5),
    ormAcquireTimeoutMs: int(env, 'ORM_ACQUIRE_TIMEOUT_MS', 10_000, 10, 60_000),
    corsOrigins: origins(env, 'CORS_ORIGINS'),
    approvalTtlS: int(env, 'APPROVAL_TTL_S', 900, 1, 604_800),
    approvalSecret: secret(env, 'APPROVAL_SECRET', 32),
    streamTokenTtlMs: int(env, 'STREAM_TOKEN_TTL_MS', 60_000, 1_000, 3_600_000),
    streamTokensPerKey: int(env, 'STREAM_TOKENS_PER_KEY', 100, 1, 10_000),
    importMaxBytes: int(env, 'IMPORT_MAX_BYTES', 100 * 1024 * 1024, 1_024, 10 * 1024 * 1024 * 1024),
    importStallTimeoutMs: int(env, 'IMPORT_STALL_TIMEOUT_MS', 30_000, 1_000, 3_600_000),
    // A quarter of the data pool by default: an export holds its connection for as long as it streams.
    exportConcurrency: int(env, 'EXPORT_CONCURRENCY', Math.max(1, Math.floor(dataPoolSize / 4)), 1, dataPoolSize),
    exportMaxPerKey: int(env, 'EXPORT_MAX_PER_KEY', 1, 1, 1_000),
    exportStallTimeoutMs: int(env, 'EXPORT_STALL_TIMEOUT_MS', 30_000, 1_000, 3_600_000),
    exportMaxDurationMs: int(env, 'EXPORT_MAX_DURATION_MS', 900_000, 1_000, 86_400_000),
    metricsToken: str(env, 'METRICS_TOKEN'),
    quotaTokensPerKeyDay: optionalInt(env, 'QUOTA_TOKENS_PER_KEY_DAY', 0, Number.MAX_SAFE_INTEGER),
    quotaTokensPerAgentDay: optionalInt(env, 'QUOTA_TOKENS_PER_AGENT_DAY', 0, Number.MAX_SAFE_INTEGER),
    webhookAllowPrivate: bool(env, 'WEBHOOK_ALLOW_PRIVATE', false),
    webhookMaxAttempts: int(env, 'WEBHOOK_MAX_ATTEMPTS', 30, 1, 1_000),
    webhookMaxAgeHours: int(env, 'WEBHOOK_MAX_AGE_HOURS', 24, 1, 24 * 30),
    webhookTimeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 120_000),
    webhookRetryDelayS: int(env, 'WEBHOOK_RETRY_DELAY_S', 30, 1, 86_400),
    webhookRetryDelayMaxS: int(env, 'WEBHOOK_RETRY_DELAY_MAX_S', 3_600, 1, 86_400),
    webhookDisableAfterHours: int(env, 'WEBHOOK_DISABLE_AFTER_HOURS', 72, 1, 24 * 365),
    webhookOwnerConcurrency: int(env, 'WEBHOOK_OWNER_CONCURRENCY', 2, 1, 1_000),
    smtpUrl: url(env, 'SMTP_URL', ['smtp:', 'smtps:']),
    smtpFrom: str(env, 'SMTP_FROM') ?? 'data-copilot@localhost',
    schedulePollIntervalMs: int(env, 'SCHEDULE_POLL_INTERVAL_MS', 5_000, 100, 600_000),
    scheduleMinIntervalS: int(env, 'SCHEDULE_MIN_INTERVAL_S', 60, 60, 86_400),
    scheduleQuestionTimeoutS: int(env, 'SCHEDULE_QUESTION_TIMEOUT_S', 300, 5, 3_600),
    jobConcurrency: int(env, 'JOB_CONCURRENCY', 8, 1, 1_000),
    jobPollIntervalMs: int(env, 'JOB_POLL_INTERVAL_MS', 2_000, 500, 600_000),
    jobLeaseMarginS: int(env, 'JOB_LEASE_MARGIN_S', 60, 1, 3_600),
    jobSuperviseIntervalS: int(env, 'JOB_SUPERVISE_INTERVAL_S', 60, 1, 3_600),
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 1200, 0, 10_000_000),
    authFailuresPerMinute: int(env, 'AUTH_FAILURES_PER_MINUTE', 30, 0, 10_000_000),
    oidcIssuers: issuers,
    oidcJwksRefreshMs: int(env, 'AUTH_OIDC_JWKS_REFRESH_MS', 60_000, 1_000, 86_400_000),
    playgroundSignIn: playgroundSignIn(env, issuers, playground),
  };
}

/** TOOL_STATEMENT_TIMEOUT_MS is the old name of QUERY_TIMEOUT_MS, read only when the new one is unset. */
function queryTimeoutVariable(env: Env): string {
  return str(env, 'QUERY_TIMEOUT_MS') === undefined && str(env, 'TOOL_STATEMENT_TIMEOUT_MS') !== undefined
    ? 'TOOL_STATEMENT_TIMEOUT_MS'
    : 'QUERY_TIMEOUT_MS';
}

/** Valid but discouraged settings, one message each, for the start-up log. */
export function configWarnings(env: Env = process.env): string[] {
  const warnings: string[] = [];
  if (str(env, 'TOOL_STATEMENT_TIMEOUT_MS') !== undefined) {
    warnings.push(
      str(env, 'QUERY_TIMEOUT_MS') === undefined
        ? 'TOOL_STATEMENT_TIMEOUT_MS is deprecated: rename it to QUERY_TIMEOUT_MS (it now bounds REST data queries too)'
        : 'TOOL_STATEMENT_TIMEOUT_MS is deprecated and ignored: QUERY_TIMEOUT_MS is set',
    );
  }
  if (str(env, 'DATABASE_URL') !== undefined && str(env, 'APPROVAL_SECRET') === undefined) {
    warnings.push(
      'APPROVAL_SECRET is unset: approval tokens are signed with a key generated into DATA_DIR, which only replicas sharing that directory know',
    );
  }
  return warnings;
}

/** Injection token of the AppConfig object. */
export const APP_CONFIG = Symbol('APP_CONFIG');
