import { Client } from 'pg';

/**
 * One database connection of its own, outside every pool, for checks that must answer while the
 * pools are busy (GET /health). It connects on first use, and again after any failure; every step
 * (connecting, each statement) ends after `timeoutMs`, so a hung server gives an error, not a wait.
 */
export class StandaloneConnection {
  private client?: Promise<Client>;

  constructor(
    private readonly databaseUrl: string,
    private readonly applicationName: string,
    private readonly timeoutMs: number,
  ) {}

  /** Runs one statement with bound parameters; its rows. */
  async query<T extends Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
    const connecting = (this.client ??= this.connect());
    try {
      const client = await connecting;
      return (await client.query<T>(sql, params)).rows;
    } catch (error) {
      // Whatever failed (connect, timeout, lost connection), the next call starts on a new connection.
      this.drop(connecting);
      throw error;
    }
  }

  async close(): Promise<void> {
    const connecting = this.client;
    this.client = undefined;
    const client = await connecting?.catch(() => undefined);
    await client?.end().catch(() => undefined);
  }

  private connect(): Promise<Client> {
    const client = new Client({
      connectionString: this.databaseUrl,
      application_name: this.applicationName,
      connectionTimeoutMillis: this.timeoutMs,
      statement_timeout: this.timeoutMs,
      // Client-side too: a server that stopped answering altogether never sends the timeout error.
      query_timeout: this.timeoutMs,
    });
    const connecting = client.connect().then(() => client);
    // A dropped connection is an 'error' event; unhandled, it would end the process.
    client.on('error', () => this.drop(connecting));
    return connecting;
  }

  private drop(connecting: Promise<Client>): void {
    if (this.client !== connecting) return;
    this.client = undefined;
    void connecting.then(
      (client) => client.end().catch(() => undefined),
      () => undefined,
    );
  }
}
