import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import type { Grounding } from '../src/runtime/grounding';
import { expectedFrom, grade, type EvalCase, type Expected, type Observed } from './eval-cases';

export interface EvalOptions {
  /** The API of a running server, e.g. http://127.0.0.1:3000. */
  api: string;
  apiKey: string;
  /** The server's database, where the cases' SQL computes the expected figures. */
  databaseUrl: string;
  cases: EvalCase[];
  agent: string;
  model: string;
  repeat: number;
  /** USD per million tokens of the model, when known. */
  price?: { input: number; output: number };
  /** Longest wait for one answer. */
  caseTimeoutMs?: number;
  /** Called after each run of a case (progress). */
  onRun?(run: CaseRun, done: number, total: number): void;
}

/** One run of one case. */
export interface CaseRun {
  id: string;
  attempt: number;
  passed: boolean;
  reasons: string[];
  answer: string;
  grounding: Grounding | null;
  toolCalls: number;
  promptTokens: number;
  completionTokens: number;
  latencyMs: number;
  chatId?: string;
}

export interface CaseReport {
  id: string;
  kind: string;
  expects: EvalCase['expects'];
  question: string;
  /** Every run passed. */
  passed: boolean;
  /** Runs that passed, of `runs.length`. */
  passes: number;
  expected: Expected | null;
  runs: CaseRun[];
}

export interface EvalSummary {
  model: string;
  agent: string;
  cases: number;
  repeat: number;
  /** Passed runs / all runs. */
  accuracy: number;
  /** Cases whose every run passed / cases (pass^k with k = repeat). */
  passK: number;
  /** Accuracy per kind of case. */
  byKind: Record<string, number>;
  /** Mean tool calls per run. */
  toolCalls: number;
  /** Mean tokens per run. */
  tokens: number;
  promptTokens: number;
  completionTokens: number;
  latencyP50: number;
  latencyP95: number;
  /** USD for all runs; null when the model has no price. */
  cost: number | null;
  startedAt: string;
  durationMs: number;
}

export interface EvalReport {
  summary: EvalSummary;
  cases: CaseReport[];
}

interface ChatBody {
  id: string;
  status: string;
  lastError?: { code: string; message: string } | null;
}

interface MessageBody {
  id: number;
  role: string;
  parts: Array<{ type: string; text?: string }>;
  metadata?: { grounding?: Grounding; superseded?: boolean };
  usage?: { promptTokens: number; completionTokens: number };
}

/** Runs every case `repeat` times as durable chats through the HTTP API and grades each answer. */
export async function runEval(options: EvalOptions): Promise<EvalReport> {
  const startedAt = new Date();
  const db = new Client({ connectionString: options.databaseUrl });
  await db.connect();
  const reports: CaseReport[] = [];
  const total = options.cases.length * options.repeat;
  let done = 0;
  try {
    for (const evalCase of options.cases) {
      const expected = evalCase.sql
        ? expectedFrom(evalCase, (await db.query(evalCase.sql)).rows as Record<string, unknown>[])
        : null;
      const runs: CaseRun[] = [];
      for (let attempt = 1; attempt <= options.repeat; attempt++) {
        const run = await runCase(options, evalCase, expected, attempt);
        runs.push(run);
        options.onRun?.(run, ++done, total);
      }
      const passes = runs.filter((r) => r.passed).length;
      reports.push({
        id: evalCase.id,
        kind: evalCase.kind,
        expects: evalCase.expects,
        question: evalCase.question,
        passed: passes === runs.length,
        passes,
        expected,
        runs,
      });
    }
  } finally {
    await db.end();
  }
  return { summary: summarise(options, reports, startedAt), cases: reports };
}

async function runCase(options: EvalOptions, evalCase: EvalCase, expected: Expected | null, attempt: number): Promise<CaseRun> {
  const started = performance.now();
  const run: CaseRun = {
    id: evalCase.id,
    attempt,
    passed: false,
    reasons: [],
    answer: '',
    grounding: null,
    toolCalls: 0,
    promptTokens: 0,
    completionTokens: 0,
    latencyMs: 0,
  };
  let observed: Observed;
  try {
    const chat = await api<ChatBody>(options, 'POST', '/api/v1/chats', { agent: options.agent, message: evalCase.question });
    run.chatId = chat.id;
    const final = await untilSettled(options, chat.id, options.caseTimeoutMs ?? 180_000);
    run.latencyMs = performance.now() - started;
    const { messages } = await api<{ messages: MessageBody[] }>(options, 'GET', `/api/v1/chats/${chat.id}/messages`);
    const assistants = messages.filter((m) => m.role === 'assistant');
    const answer = assistants.filter((m) => !m.metadata?.superseded).at(-1);
    run.answer = (answer?.parts ?? []).map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('');
    run.grounding = answer?.metadata?.grounding ?? null;
    run.toolCalls = assistants.reduce((n, m) => n + m.parts.filter((p) => p.type === 'tool-call').length, 0);
    for (const m of assistants) {
      run.promptTokens += m.usage?.promptTokens ?? 0;
      run.completionTokens += m.usage?.completionTokens ?? 0;
    }
    const failure =
      final.status === 'waiting'
        ? undefined
        : `chat ended ${final.status}${final.lastError ? `: ${final.lastError.code} ${final.lastError.message}` : ''}`;
    observed = { answer: run.answer, grounding: run.grounding, toolCalls: run.toolCalls, failure };
  } catch (error) {
    run.latencyMs = performance.now() - started;
    observed = { answer: '', grounding: null, toolCalls: 0, failure: (error as Error).message };
  }
  const graded = grade(evalCase, expected, observed);
  run.passed = graded.passed;
  run.reasons = graded.reasons;
  return run;
}

/** Polls the chat until it leaves pending/running (waiting, requires_action or error). */
async function untilSettled(options: EvalOptions, id: string, timeoutMs: number): Promise<ChatBody> {
  const until = Date.now() + timeoutMs;
  for (let wait = 20; ; wait = Math.min(wait * 2, 500)) {
    const chat = await api<ChatBody>(options, 'GET', `/api/v1/chats/${id}`);
    if (chat.status !== 'pending' && chat.status !== 'running') return chat;
    if (Date.now() > until) throw new Error(`no answer within ${Math.round(timeoutMs / 1000)} s (status ${chat.status})`);
    await sleep(wait);
  }
}

async function api<T>(options: EvalOptions, method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(new URL(path, options.api), {
    method,
    headers: { authorization: `Bearer ${options.apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} → ${response.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

function summarise(options: EvalOptions, cases: CaseReport[], startedAt: Date): EvalSummary {
  const runs = cases.flatMap((c) => c.runs);
  const mean = (values: number[]) => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : 0);
  const promptTokens = runs.reduce((n, r) => n + r.promptTokens, 0);
  const completionTokens = runs.reduce((n, r) => n + r.completionTokens, 0);
  const byKind: Record<string, number> = {};
  for (const kind of [...new Set(cases.map((c) => c.kind))]) {
    const of = runs.filter((r) => cases.find((c) => c.id === r.id)?.kind === kind);
    byKind[kind] = round(of.filter((r) => r.passed).length / of.length);
  }
  const latencies = runs.map((r) => r.latencyMs).sort((a, b) => a - b);
  return {
    model: options.model,
    agent: options.agent,
    cases: cases.length,
    repeat: options.repeat,
    accuracy: round(runs.length ? runs.filter((r) => r.passed).length / runs.length : 0),
    passK: round(cases.length ? cases.filter((c) => c.passed).length / cases.length : 0),
    byKind,
    toolCalls: round(mean(runs.map((r) => r.toolCalls))),
    tokens: Math.round(mean(runs.map((r) => r.promptTokens + r.completionTokens))),
    promptTokens,
    completionTokens,
    latencyP50: Math.round(percentile(latencies, 0.5)),
    latencyP95: Math.round(percentile(latencies, 0.95)),
    cost: options.price ? round((promptTokens * options.price.input + completionTokens * options.price.output) / 1e6, 6) : null,
    startedAt: startedAt.toISOString(),
    durationMs: Date.now() - startedAt.getTime(),
  };
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: readonly number[], p: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

function round(value: number, digits = 4): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
