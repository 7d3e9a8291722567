import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ChatMessagesResponse, ChatResponse } from '../../src/chats/durable/chat.dto';
import { projectRoot } from '../../src/common/project-root';
import { freePort } from '../support/free-port';
import { MockLlmServer, MockReply } from '../support/mock-llm.server';
import { TEST_ADMIN_KEY } from '../support/test-app';

/** `npm start` as a terminal runs it: its own process group, so Ctrl-C can be sent to the whole group. */
class StartedServer {
  output = '';
  /** npm's own status mirrors the signal it got; the app's clean exit shows in its log. */
  readonly exited: Promise<void>;

  private constructor(
    private readonly child: ChildProcess,
    readonly baseUrl: string,
  ) {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (this.output += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.output += chunk));
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }

  static async start(env: Record<string, string>): Promise<StartedServer> {
    const inherited = { ...process.env };
    // The test runner's own settings are not the user's.
    for (const name of ['NODE_OPTIONS', 'DATABASE_URL', 'TEST_DATABASE_URL', 'JEST_WORKER_ID']) delete inherited[name];
    // --ignore-scripts skips only prestart (the build), which `npm test` has already done.
    const child = spawn('npm', ['start', '--ignore-scripts', '--silent'], {
      cwd: projectRoot(),
      env: { ...inherited, ...env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const server = new StartedServer(child, `http://127.0.0.1:${env.PORT}`);
    await server.waitForHealth();
    return server;
  }

  /** What Ctrl-C in a terminal does: SIGINT to every process of the foreground group. */
  interruptGroup(): void {
    process.kill(-this.child.pid!, 'SIGINT');
  }

  /** The parsed JSON body, typed as the caller expects (undefined for a 204). */
  async api<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${TEST_ADMIN_KEY}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return (res.status === 204 ? undefined : await res.json()) as T;
  }

  /** The app logged the end of its shutdown (its last line before exit 0). */
  stoppedCleanly(): boolean {
    return this.output.split('\n').some((line) => line.includes('"msg":"stopped"'));
  }

  /** Log lines at error level or above (JSON lines; anything unparsable counts as a problem too). */
  problems(): string[] {
    return this.output
      .split('\n')
      .filter((line) => line.trim())
      .filter((line) => {
        try {
          const level = (JSON.parse(line) as { level?: unknown }).level;
          return level === 'error' || level === 'fatal' || (typeof level === 'number' && level >= 50);
        } catch {
          return !line.includes('ExperimentalWarning') && !line.startsWith('(Use `node --trace-warnings');
        }
      });
  }

  private async waitForHealth(): Promise<void> {
    const until = Date.now() + 90_000;
    while (Date.now() < until) {
      const ok = await fetch(`${this.baseUrl}/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      if (this.child.exitCode !== null) throw new Error(`npm start exited early:\n${this.output}`);
      await sleep(200);
    }
    throw new Error(`npm start never became healthy:\n${this.output}`);
  }
}

describe('Ctrl-C on npm start', () => {
  let llm: MockLlmServer;
  let dataDir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    llm = await MockLlmServer.start();
    dataDir = await mkdtemp(join(tmpdir(), 'data-copilot-shutdown-'));
    env = {
      PORT: String(await freePort()),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      EMBEDDED_POSTGRES_PORT: String(await freePort()),
      ADMIN_API_KEY: TEST_ADMIN_KEY,
      OPENAI_BASE_URL: llm.url,
      OPENAI_API_KEY: 'k',
      SEED: 'false',
      LOG_LEVEL: 'info',
      CHAT_POLL_INTERVAL_MS: '200',
      // Long enough that only a proper hand-back, not stale recovery, can finish the chat in this test.
      CHAT_STALE_AFTER_MS: '600000',
    };
  });

  afterAll(async () => {
    await llm.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('hands a running chat back before the app stops its Postgres, so the next start finishes it', async () => {
    llm.enqueue(MockReply.hang(), MockReply.text('answered after the restart'));
    const first = await StartedServer.start(env);
    let chatId: string;
    try {
      chatId = (await first.api<ChatResponse>('POST', '/api/v1/chats', { agent: 'data_chat', message: 'how many deals?' })).id;
      await llm.waitForRequests(1);
      expect((await first.api<ChatResponse>('GET', `/api/v1/chats/${chatId}`)).status).toBe('running');
    } finally {
      first.interruptGroup();
    }
    await first.exited;
    expect(first.stoppedCleanly()).toBe(true);
    expect(first.problems()).toEqual([]);
    // Postgres removes its pid file only on a clean shutdown, which the app asked for after the hand-back.
    expect(existsSync(join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);

    const second = await StartedServer.start(env);
    try {
      const until = Date.now() + 15_000;
      let chat: ChatResponse;
      do {
        chat = await second.api<ChatResponse>('GET', `/api/v1/chats/${chatId}`);
        if (chat.status === 'waiting') break;
        await sleep(100);
      } while (Date.now() < until);
      expect(chat).toMatchObject({ status: 'waiting', lastError: null });
      const { messages } = await second.api<ChatMessagesResponse>('GET', `/api/v1/chats/${chatId}/messages`);
      expect(messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant']);
      expect(messages[1].parts).toEqual([{ type: 'text', text: 'answered after the restart' }]);
    } finally {
      second.interruptGroup();
    }
    await second.exited;
    expect(second.stoppedCleanly()).toBe(true);
    expect(second.problems()).toEqual([]);
    expect(existsSync(join(dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
  });
});
