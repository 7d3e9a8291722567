import { resolve } from 'node:path';
import { ConfigError, configWarnings, loadConfig } from './app-config';

/** Runs loadConfig and returns the ConfigError it throws (fails the test when it does not throw one). */
function configErrorOf(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('loadConfig', () => {
  it('applies the documented defaults when nothing is set', () => {
    const config = loadConfig({});

    expect(config).toMatchObject({
      port: 3000,
      host: '127.0.0.1',
      dataDir: resolve('./.data'),
      llmModel: 'gpt-4o-mini',
      seed: true,
      playground: true,
      logLevel: 'info',
      logFormat: 'json',
    });
    expect(config.databaseUrl).toBeUndefined();
    expect(config.adminApiKey).toBeUndefined();
    expect(config.openaiApiKey).toBeUndefined();
    expect(config.openaiBaseUrl).toBeUndefined();
  });

  it('reads every documented variable', () => {
    const config = loadConfig({
      PORT: '8080',
      HOST: '0.0.0.0',
      DATABASE_URL: 'postgres://app:secret@db.internal:5432/copilot',
      DATA_DIR: '/var/lib/copilot',
      ADMIN_API_KEY: 'an-admin-key-of-enough-length',
      OPENAI_API_KEY: 'sk-live',
      OPENAI_BASE_URL: 'http://localhost:11434/v1',
      LLM_MODEL: 'llama3.1',
      SEED: 'false',
      PLAYGROUND: 'false',
      LOG_LEVEL: 'WARN',
    });

    expect(config).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      databaseUrl: 'postgres://app:secret@db.internal:5432/copilot',
      dataDir: '/var/lib/copilot',
      adminApiKey: 'an-admin-key-of-enough-length',
      openaiApiKey: 'sk-live',
      openaiBaseUrl: 'http://localhost:11434/v1',
      llmModel: 'llama3.1',
      seed: false,
      playground: false,
      logLevel: 'warn',
    });
  });

  it('accepts postgresql:// URLs and https base URLs', () => {
    const config = loadConfig({ DATABASE_URL: 'postgresql://localhost/db', OPENAI_BASE_URL: 'https://api.openai.com/v1' });
    expect(config.databaseUrl).toBe('postgresql://localhost/db');
    expect(config.openaiBaseUrl).toBe('https://api.openai.com/v1');
  });

  it.each([
    ['json', 'json'],
    ['pretty', 'pretty'],
  ])('reads LOG_FORMAT=%s', (value, expected) => {
    expect(loadConfig({ LOG_FORMAT: value }).logFormat).toBe(expected);
  });

  it('watches model streams and caps Retry-After, by default and as set', () => {
    expect(loadConfig({})).toMatchObject({
      llmFirstChunkTimeoutMs: 60_000,
      llmStallTimeoutMs: 60_000,
      llmRetryAfterMaxMs: 30_000,
    });
    expect(
      loadConfig({ LLM_FIRST_CHUNK_TIMEOUT_MS: '90000', LLM_STALL_TIMEOUT_MS: '15000', LLM_RETRY_AFTER_MAX_MS: '0' }),
    ).toMatchObject({ llmFirstChunkTimeoutMs: 90_000, llmStallTimeoutMs: 15_000, llmRetryAfterMaxMs: 0 });
    expect(configErrorOf({ LLM_STALL_TIMEOUT_MS: '10' }).variable).toBe('LLM_STALL_TIMEOUT_MS');
    expect(configErrorOf({ LLM_FIRST_CHUNK_TIMEOUT_MS: 'soon' }).variable).toBe('LLM_FIRST_CHUNK_TIMEOUT_MS');
    expect(configErrorOf({ LLM_RETRY_AFTER_MAX_MS: '3600000' }).variable).toBe('LLM_RETRY_AFTER_MAX_MS');
  });

  it('bounds what a model call sends by LLM_CONTEXT_TOKENS: 120000 by default, 1000 to 10000000 when set', () => {
    expect(loadConfig({}).llmContextTokens).toBe(120_000);
    expect(loadConfig({ LLM_CONTEXT_TOKENS: '32000' }).llmContextTokens).toBe(32_000);
    expect(configErrorOf({ LLM_CONTEXT_TOKENS: '999' }).variable).toBe('LLM_CONTEXT_TOKENS');
    expect(configErrorOf({ LLM_CONTEXT_TOKENS: '128k' }).variable).toBe('LLM_CONTEXT_TOKENS');
  });

  it('refuses private webhook targets and bounds webhook retries by default, as set otherwise', () => {
    expect(loadConfig({})).toMatchObject({
      webhookAllowPrivate: false,
      webhookMaxAttempts: 30,
      webhookMaxAgeHours: 24,
      webhookTimeoutMs: 10_000,
      webhookDisableAfterHours: 72,
      webhookOwnerConcurrency: 2,
      jobConcurrency: 8,
    });
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_MAX_ATTEMPTS: '5', WEBHOOK_TIMEOUT_MS: '2000' })).toMatchObject({
      webhookAllowPrivate: true,
      webhookMaxAttempts: 5,
      webhookTimeoutMs: 2000,
    });
    expect(configErrorOf({ WEBHOOK_MAX_ATTEMPTS: '0' }).variable).toBe('WEBHOOK_MAX_ATTEMPTS');
    expect(configErrorOf({ WEBHOOK_ALLOW_PRIVATE: 'maybe' }).variable).toBe('WEBHOOK_ALLOW_PRIVATE');
  });

  it('leases jobs 60 s beyond their work and looks for ended leases every 60 s by default, as set otherwise', () => {
    expect(loadConfig({})).toMatchObject({ jobLeaseMarginS: 60, jobSuperviseIntervalS: 60 });
    expect(loadConfig({ JOB_LEASE_MARGIN_S: '5', JOB_SUPERVISE_INTERVAL_S: '2' })).toMatchObject({
      jobLeaseMarginS: 5,
      jobSuperviseIntervalS: 2,
    });
    expect(configErrorOf({ JOB_LEASE_MARGIN_S: '0' }).variable).toBe('JOB_LEASE_MARGIN_S');
    expect(configErrorOf({ JOB_SUPERVISE_INTERVAL_S: '3601' }).variable).toBe('JOB_SUPERVISE_INTERVAL_S');
  });

  it('protects the metrics with METRICS_TOKEN only when it is set', () => {
    expect(loadConfig({}).metricsToken).toBeUndefined();
    expect(loadConfig({ METRICS_TOKEN: '  ' }).metricsToken).toBeUndefined();
    expect(loadConfig({ METRICS_TOKEN: 'scrape-me' }).metricsToken).toBe('scrape-me');
  });

  it('caps chats in flight and event streams per key and bounds request reception, by default and as set', () => {
    expect(loadConfig({})).toMatchObject({ chatMaxInFlightPerKey: 32, sseMaxStreamsPerKey: 20, httpRequestTimeoutMs: 30_000 });
    expect(
      loadConfig({ CHAT_MAX_IN_FLIGHT_PER_KEY: '5', SSE_MAX_STREAMS_PER_KEY: '3', HTTP_REQUEST_TIMEOUT_MS: '2500' }),
    ).toMatchObject({ chatMaxInFlightPerKey: 5, sseMaxStreamsPerKey: 3, httpRequestTimeoutMs: 2500 });
  });

  it('bounds CSV exports by default (a quarter of the data pool) and as set', () => {
    expect(loadConfig({})).toMatchObject({
      exportConcurrency: 2,
      exportMaxPerKey: 1,
      exportStallTimeoutMs: 30_000,
      exportMaxDurationMs: 900_000,
    });
    expect(loadConfig({ DATA_POOL_SIZE: '2' }).exportConcurrency).toBe(1);
    expect(
      loadConfig({
        EXPORT_CONCURRENCY: '4',
        EXPORT_MAX_PER_KEY: '2',
        EXPORT_STALL_TIMEOUT_MS: '5000',
        EXPORT_MAX_DURATION_MS: '60000',
      }),
    ).toMatchObject({ exportConcurrency: 4, exportMaxPerKey: 2, exportStallTimeoutMs: 5000, exportMaxDurationMs: 60_000 });
  });

  it('bounds how long an import waits for more of its upload, by default and as set', () => {
    expect(loadConfig({}).importStallTimeoutMs).toBe(30_000);
    expect(loadConfig({ IMPORT_STALL_TIMEOUT_MS: '2000' }).importStallTimeoutMs).toBe(2000);
  });

  it('treats empty and blank values as unset', () => {
    const config = loadConfig({ PORT: '', ADMIN_API_KEY: '', DATABASE_URL: '   ', SEED: '' });
    expect(config.port).toBe(3000);
    expect(config.adminApiKey).toBeUndefined();
    expect(config.databaseUrl).toBeUndefined();
    expect(config.seed).toBe(true);
  });

  it.each([
    ['true', true],
    ['1', true],
    ['yes', true],
    ['FALSE', false],
    ['0', false],
    ['off', false],
  ])('reads SEED=%s as %s', (value, expected) => {
    expect(loadConfig({ SEED: value }).seed).toBe(expected);
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['DATABASE_URL', 'notaurl'],
    ['DATABASE_URL', 'mysql://localhost/db'],
    ['DATABASE_READ_URL', 'mysql://replica/db'],
    ['READ_MAX_LAG_MS', 'soon'],
    ['READ_MAX_LAG_MS', '700000'],
    ['SEED', 'maybe'],
    ['PLAYGROUND', 'sometimes'],
    ['LOG_LEVEL', 'loud'],
    ['LOG_FORMAT', 'xml'],
    ['OPENAI_BASE_URL', 'ftp://models.example.com'],
    ['OPENAI_BASE_URL', 'not a url'],
    ['CHAT_MAX_IN_FLIGHT_PER_KEY', '0'],
    ['SSE_MAX_STREAMS_PER_KEY', '0'],
    ['SSE_MAX_STREAMS_PER_KEY', 'many'],
    ['HTTP_REQUEST_TIMEOUT_MS', '0'],
    ['HTTP_REQUEST_TIMEOUT_MS', '50'],
    ['QUERY_TIMEOUT_MS', '50'],
    ['QUERY_TIMEOUT_MS', '5s'],
    ['TOOL_STATEMENT_TIMEOUT_MS', 'soon'],
    ['DB_ACQUIRE_TIMEOUT_MS', '0'],
    ['ORM_ACQUIRE_TIMEOUT_MS', '0'],
    ['ORM_ACQUIRE_TIMEOUT_MS', '120000'],
    ['RECORDS_COUNT_CAP', '-1'],
    ['RECORDS_COUNT_CAP', '10k'],
    ['DATA_POOL_SIZE', '0'],
    ['DATA_POOL_SIZE', '2000'],
    ['DATA_POOL_KEY_SHARE', '0'],
    ['DATA_POOL_KEY_SHARE', '1.5'],
    ['DATA_POOL_KEY_SHARE', 'half'],
    ['DATA_POOL_KEY_SHARE', '-0.5'],
    ['CHAT_WORKER_CONCURRENCY', '0'],
    ['CHAT_WORKER_CONCURRENCY', '200000'],
    ['LLM_MAX_CONCURRENCY', '0'],
    ['CHAT_TOOL_CONCURRENCY', '0'],
    ['CHAT_TOOL_CONCURRENCY', '11'],
    ['EXPORT_CONCURRENCY', '0'],
    ['EXPORT_CONCURRENCY', '11'],
    ['EXPORT_MAX_PER_KEY', '0'],
    ['EXPORT_STALL_TIMEOUT_MS', '10'],
    ['EXPORT_MAX_DURATION_MS', 'forever'],
    ['CORS_ORIGINS', 'app.example.com'],
    ['CORS_ORIGINS', 'https://app.example.com/path'],
    ['CORS_ORIGINS', 'ftp://files.example.com'],
    ['CORS_ORIGINS', 'https://a.example.com, *'],
  ])('refuses %s=%s with a ConfigError naming the variable', (variable, value) => {
    const error = configErrorOf({ [variable]: value });

    expect(error).toBeInstanceOf(ConfigError);
    expect(error.variable).toBe(variable);
    expect(error.message).toContain(variable);
  });

  it('reads the replica for reads, the lag it may have (default 2000 ms), and wants the primary it replicates', () => {
    expect(loadConfig({})).toMatchObject({ databaseReadUrl: undefined, readMaxLagMs: 2000 });
    expect(
      loadConfig({
        DATABASE_URL: 'postgres://primary.internal/copilot',
        DATABASE_READ_URL: 'postgres://replica.internal/copilot',
        READ_MAX_LAG_MS: '500',
      }),
    ).toMatchObject({ databaseReadUrl: 'postgres://replica.internal/copilot', readMaxLagMs: 500 });
    // The embedded Postgres has no replica: a read URL alone is a mistake, not a setup.
    expect(configErrorOf({ DATABASE_READ_URL: 'postgres://replica.internal/copilot' }).variable).toBe('DATABASE_READ_URL');
  });

  it('accepts any ADMIN_API_KEY, short ones included (that exact secret becomes an admin key)', () => {
    expect(loadConfig({ ADMIN_API_KEY: '1234567890123456' }).adminApiKey).toBe('1234567890123456');
    expect(loadConfig({ ADMIN_API_KEY: 'short' }).adminApiKey).toBe('short');
  });

  it('names the bad variable even when the other values are valid', () => {
    const error = configErrorOf({
      PORT: '3001',
      SEED: 'true',
      DATABASE_URL: 'postgres://localhost/db',
      LOG_LEVEL: 'debug',
      OPENAI_BASE_URL: 'ftp://x',
    });
    expect(error.variable).toBe('OPENAI_BASE_URL');
  });

  describe('durable chats at scale', () => {
    it('runs 512 chats at once, 256 model calls at once, and chats use at most half the data pool', () => {
      expect(loadConfig({})).toMatchObject({ chatWorkerConcurrency: 512, llmMaxConcurrency: 256, chatToolConcurrency: 5 });
    });

    it('runs twice as many chats at once as LLM_MAX_CONCURRENCY allows model calls, unless CHAT_WORKER_CONCURRENCY says', () => {
      expect(loadConfig({ LLM_MAX_CONCURRENCY: '32' }).chatWorkerConcurrency).toBe(64);
      expect(loadConfig({ LLM_MAX_CONCURRENCY: '32', CHAT_WORKER_CONCURRENCY: '10' }).chatWorkerConcurrency).toBe(10);
    });

    it('reads CHAT_WORKER_CONCURRENCY, LLM_MAX_CONCURRENCY and CHAT_TOOL_CONCURRENCY up to the data pool size', () => {
      const env = {
        CHAT_WORKER_CONCURRENCY: '5000',
        LLM_MAX_CONCURRENCY: '32',
        DATA_POOL_SIZE: '20',
        CHAT_TOOL_CONCURRENCY: '20',
      };
      expect(loadConfig(env)).toMatchObject({ chatWorkerConcurrency: 5000, llmMaxConcurrency: 32, chatToolConcurrency: 20 });
      expect(loadConfig({ DATA_POOL_SIZE: '1' }).chatToolConcurrency).toBe(1);
    });
  });

  describe('data engine limits', () => {
    it('defaults to a 5 s query timeout, a 2 s wait for a connection and 10 connections', () => {
      expect(loadConfig({})).toMatchObject({
        queryTimeoutMs: 5000,
        dbAcquireTimeoutMs: 2000,
        dataPoolSize: 10,
        ormAcquireTimeoutMs: 10000,
      });
      expect(configWarnings({})).toEqual([]);
    });

    it('reads QUERY_TIMEOUT_MS, DB_ACQUIRE_TIMEOUT_MS, DATA_POOL_SIZE and ORM_ACQUIRE_TIMEOUT_MS', () => {
      const env = { QUERY_TIMEOUT_MS: '750', DB_ACQUIRE_TIMEOUT_MS: '250', DATA_POOL_SIZE: '3', ORM_ACQUIRE_TIMEOUT_MS: '900' };
      expect(loadConfig(env)).toMatchObject({
        queryTimeoutMs: 750,
        dbAcquireTimeoutMs: 250,
        dataPoolSize: 3,
        ormAcquireTimeoutMs: 900,
      });
    });

    it('counts a records total exactly up to 10,000 by default, RECORDS_COUNT_CAP otherwise', () => {
      expect(loadConfig({}).recordsCountCap).toBe(10_000);
      expect(loadConfig({ RECORDS_COUNT_CAP: '500' }).recordsCountCap).toBe(500);
      expect(loadConfig({ RECORDS_COUNT_CAP: '0' }).recordsCountCap).toBe(0);
    });

    it('lets one API key hold half of each data pool by default, DATA_POOL_KEY_SHARE otherwise', () => {
      expect(loadConfig({}).dataPoolKeyShare).toBe(0.5);
      expect(loadConfig({ DATA_POOL_KEY_SHARE: '0.25' }).dataPoolKeyShare).toBe(0.25);
      expect(loadConfig({ DATA_POOL_KEY_SHARE: '1' }).dataPoolKeyShare).toBe(1);
    });

    it('still reads the deprecated TOOL_STATEMENT_TIMEOUT_MS when QUERY_TIMEOUT_MS is unset, with a warning', () => {
      const env = { TOOL_STATEMENT_TIMEOUT_MS: '1500' };
      expect(loadConfig(env).queryTimeoutMs).toBe(1500);
      expect(configWarnings(env)).toEqual([expect.stringContaining('rename it to QUERY_TIMEOUT_MS')]);
    });

    it('prefers QUERY_TIMEOUT_MS over the deprecated name, and says the old one is ignored', () => {
      const env = { TOOL_STATEMENT_TIMEOUT_MS: '1500', QUERY_TIMEOUT_MS: '2500' };
      expect(loadConfig(env).queryTimeoutMs).toBe(2500);
      expect(configWarnings(env)).toEqual([expect.stringContaining('ignored')]);
    });
  });

  describe('browser access', () => {
    it('allows no cross-origin access and gives stream tokens 60 s, 100 per key, when nothing is set', () => {
      const config = loadConfig({});
      expect(config.corsOrigins).toBeUndefined();
      expect(config).toMatchObject({ streamTokenTtlMs: 60_000, streamTokensPerKey: 100 });
    });

    it('reads CORS_ORIGINS as * or a list of origins, lower-cased, blanks and repeats dropped', () => {
      expect(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins).toBe('*');
      expect(
        loadConfig({ CORS_ORIGINS: ' https://App.example.com, http://localhost:5173,,https://app.example.com ' }).corsOrigins,
      ).toEqual(['https://app.example.com', 'http://localhost:5173']);
    });

    it.each([
      ['a path', 'https://app.example.com/ui'],
      ['a trailing slash', 'https://app.example.com/'],
      ['no scheme', 'app.example.com'],
      ['another scheme', 'ftp://files.example.com'],
      ['a default port spelled out', 'https://app.example.com:443'],
      ['a query', 'https://app.example.com?x=1'],
      ['* beside origins', '*, https://app.example.com'],
      ['only commas', ' , '],
    ])('refuses CORS_ORIGINS with %s, naming the variable', (_case, value) => {
      const error = configErrorOf({ CORS_ORIGINS: value });
      expect(error.variable).toBe('CORS_ORIGINS');
      expect(error.message).toContain('CORS_ORIGINS');
    });

    it('reads STREAM_TOKEN_TTL_MS and STREAM_TOKENS_PER_KEY within their bounds', () => {
      expect(loadConfig({ STREAM_TOKEN_TTL_MS: '5000', STREAM_TOKENS_PER_KEY: '3' })).toMatchObject({
        streamTokenTtlMs: 5000,
        streamTokensPerKey: 3,
      });
      expect(configErrorOf({ STREAM_TOKEN_TTL_MS: '10' }).variable).toBe('STREAM_TOKEN_TTL_MS');
      expect(configErrorOf({ STREAM_TOKENS_PER_KEY: '0' }).variable).toBe('STREAM_TOKENS_PER_KEY');
    });
  });
  describe('end-user identity (OIDC issuers)', () => {
    it('trusts no issuer by default', () => {
      expect(loadConfig({}).oidcIssuers).toEqual([]);
      expect(loadConfig({}).oidcJwksRefreshMs).toBe(60_000);
    });

    it('reads one issuer with its audience and optional JWKS URL', () => {
      expect(loadConfig({ AUTH_OIDC_ISSUER: 'https://idp.example.com/', AUTH_OIDC_AUDIENCE: 'copilot' }).oidcIssuers).toEqual([
        { issuer: 'https://idp.example.com/', audience: 'copilot' },
      ]);
      expect(
        loadConfig({
          AUTH_OIDC_ISSUER: 'http://127.0.0.1:9000',
          AUTH_OIDC_AUDIENCE: 'copilot',
          AUTH_OIDC_JWKS_URL: 'http://localhost:9000/jwks',
        }).oidcIssuers,
      ).toEqual([{ issuer: 'http://127.0.0.1:9000', audience: 'copilot', jwksUrl: 'http://localhost:9000/jwks' }]);
    });

    it('reads several issuers from AUTH_OIDC_ISSUERS', () => {
      const list = [
        { issuer: 'https://a.example.com', audience: 'x' },
        { issuer: 'https://b.example.com', audience: 'y', jwksUrl: 'https://b.example.com/keys' },
      ];
      expect(loadConfig({ AUTH_OIDC_ISSUERS: JSON.stringify(list) }).oidcIssuers).toEqual(list);
    });

    it.each([
      ['http:// off loopback', { AUTH_OIDC_ISSUER: 'http://idp.example.com', AUTH_OIDC_AUDIENCE: 'a' }, 'AUTH_OIDC_ISSUER'],
      ['no audience', { AUTH_OIDC_ISSUER: 'https://idp.example.com' }, 'AUTH_OIDC_AUDIENCE'],
      ['an audience without issuer', { AUTH_OIDC_AUDIENCE: 'a' }, 'AUTH_OIDC_AUDIENCE'],
      [
        'an http JWKS off loopback',
        { AUTH_OIDC_ISSUER: 'https://idp.example.com', AUTH_OIDC_AUDIENCE: 'a', AUTH_OIDC_JWKS_URL: 'http://10.0.0.1/jwks' },
        'AUTH_OIDC_ISSUER',
      ],
      [
        'both forms',
        { AUTH_OIDC_ISSUER: 'https://a.example.com', AUTH_OIDC_AUDIENCE: 'a', AUTH_OIDC_ISSUERS: '[]' },
        'AUTH_OIDC_ISSUERS',
      ],
      [
        'an issuer with a fragment',
        { AUTH_OIDC_ISSUER: 'https://idp.example.com/#x', AUTH_OIDC_AUDIENCE: 'a' },
        'AUTH_OIDC_ISSUER',
      ],
      [
        'an issuer with a query',
        { AUTH_OIDC_ISSUERS: '[{"issuer":"https://a.example.com/?t=1","audience":"x"}]' },
        'AUTH_OIDC_ISSUERS',
      ],
      ['a list that is not JSON', { AUTH_OIDC_ISSUERS: 'https://a.example.com' }, 'AUTH_OIDC_ISSUERS'],
      ['an empty list', { AUTH_OIDC_ISSUERS: '[]' }, 'AUTH_OIDC_ISSUERS'],
      ['an entry without audience', { AUTH_OIDC_ISSUERS: '[{"issuer":"https://a.example.com"}]' }, 'AUTH_OIDC_ISSUERS'],
      [
        'an issuer twice',
        {
          AUTH_OIDC_ISSUERS:
            '[{"issuer":"https://a.example.com","audience":"x"},{"issuer":"https://a.example.com","audience":"y"}]',
        },
        'AUTH_OIDC_ISSUERS',
      ],
    ])('refuses %s, naming the variable', (_case, env, variable) => {
      expect(configErrorOf(env).variable).toBe(variable);
    });

    it('configures the playground sign-in with the first issuer, its audience and openid among the scopes', () => {
      expect(loadConfig({}).playgroundSignIn).toBeUndefined();
      const list = [
        { issuer: 'https://a.example.com', audience: 'x' },
        { issuer: 'https://b.example.com', audience: 'y' },
      ];
      expect(
        loadConfig({ AUTH_OIDC_ISSUERS: JSON.stringify(list), PLAYGROUND_OIDC_CLIENT_ID: 'playground' }).playgroundSignIn,
      ).toEqual({ clientId: 'playground', issuer: 'https://a.example.com', audience: 'x', scopes: ['openid'] });
      expect(
        loadConfig({
          AUTH_OIDC_ISSUER: 'https://idp.example.com/',
          AUTH_OIDC_AUDIENCE: 'copilot',
          PLAYGROUND_OIDC_CLIENT_ID: 'abc',
          PLAYGROUND_OIDC_SCOPES: 'profile  email',
        }).playgroundSignIn,
      ).toEqual({
        clientId: 'abc',
        issuer: 'https://idp.example.com/',
        audience: 'copilot',
        scopes: ['openid', 'profile', 'email'],
      });
    });

    it.each([
      ['a sign-in client without an issuer', { PLAYGROUND_OIDC_CLIENT_ID: 'abc' }, 'PLAYGROUND_OIDC_CLIENT_ID'],
      [
        'a sign-in client id with a space',
        { AUTH_OIDC_ISSUER: 'https://idp.example.com', AUTH_OIDC_AUDIENCE: 'a', PLAYGROUND_OIDC_CLIENT_ID: 'a b' },
        'PLAYGROUND_OIDC_CLIENT_ID',
      ],
      [
        'a sign-in client with the playground off',
        {
          AUTH_OIDC_ISSUER: 'https://idp.example.com',
          AUTH_OIDC_AUDIENCE: 'a',
          PLAYGROUND_OIDC_CLIENT_ID: 'a',
          PLAYGROUND: 'false',
        },
        'PLAYGROUND_OIDC_CLIENT_ID',
      ],
      ['scopes without a client', { PLAYGROUND_OIDC_SCOPES: 'openid' }, 'PLAYGROUND_OIDC_SCOPES'],
    ])('refuses %s, naming the variable', (_case, env, variable) => {
      expect(configErrorOf(env).variable).toBe(variable);
    });
  });
});
