import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import type { Grounding } from '../src/runtime/grounding';
import { CRM_SAMPLE_REFERENCE_DATE } from '../src/seed/crm-sample.data';
import { expectedOf, grade, type EvalCase, type Expected, type MemberSpec, type Observed, type SqlParams } from './eval-cases';

export interface EvalOptions {
  /** The API of a running server, e.g. http://127.0.0.1:3000. */
  api: string;
  /** An admin key: it asks the cases, and creates the member key of the member cases. */
  apiKey: string;
  /** The server's database, where the cases' SQL computes the expected figures. */
  databaseUrl: string;
  cases: EvalCase[];
  /** The member key of `member` cases (required when one is run). */
  member?: MemberSpec;
  agent: string;
  model: string;
  repeat: number;
  /**
   * The eval's clock (ISO date or timestamp, default the sample data's reference date): its UTC date
   * opens every chat ("Today's date: …") and is `:today` in the cases' SQL, so "last quarter" is fixed.
   */
  now?: string;
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
  /** The graded answer: the chat's last. */
  answer: string;
  grounding: Grounding | null;
  /** Figures of the answer the server filled in from references to cells, and figures the model typed itself. */
  figures: { referenced: number; typed: number };
  toolCalls: number;
  /** As the model API reported them, summed over the chat's model steps. */
  promptTokens: number;
  completionTokens: number;
  /** Model steps whose usage the API did not report (their tokens are missing from the sums). */
  stepsWithoutUsage: number;
  latencyMs: number;
  chatId?: string;
}

export interface CaseReport {
  id: string;
  kind: string;
  expects: EvalCase['expects'];
  question: string;
  followUps?: string[];
  member?: boolean;
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
  /** The eval's date: "today" for the model and the cases' SQL. */
  today: string;
  cases: number;
  repeat: number;
  /** Passed runs / all runs. */
  accuracy: number;
  /** 95% Wilson score interval of the accuracy, over the runs. */
  accuracyInterval: [number, number];
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
  /** Model steps without reported usage: when above 0, tokens and cost are too low. */
  stepsWithoutUsage: number;
  latencyP50: number;
  latencyP95: number;
  /** USD for all runs from the reported usage; null when the model has no price. */
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
  usage?: { promptTokens: number; completionTokens: number; totalTokens?: number };
}

/** An API key the runner asks with. */
interface Asker {
  api: string;
  apiKey: string;
}

/** The date the eval's clock gives (UTC), as YYYY-MM-DD. */
export function evalDate(now: string = CRM_SAMPLE_REFERENCE_DATE): string {
  const date = new Date(now);
  if (!/^\d{4}-\d{2}-\d{2}/.test(now) || Number.isNaN(date.getTime()))
    throw new Error(`--now ${now} is not an ISO date or timestamp`);
  return date.toISOString().slice(0, 10);
}

/** The first message of every chat: the date, as a client would give it, then the question. */
export function openingMessage(question: string, today: string): string {
  return `Today's date: ${today}.\n\n${question}`;
}

/** Runs every case `repeat` times as durable chats through the HTTP API and grades each answer. */
export async function runEval(options: EvalOptions): Promise<EvalReport> {
  const startedAt = new Date();
  const today = evalDate(options.now);
  const needsMember = options.cases.some((c) => c.member);
  if (needsMember && !options.member) throw new Error('member cases need the member key spec (the suite\'s "member")');
  const db = new Client({ connectionString: options.databaseUrl });
  await db.connect();
  const member = needsMember ? await createMember(options, options.member!) : undefined;
  const params: SqlParams = { today, subject: options.member?.subject };
  const reports: CaseReport[] = [];
  const total = options.cases.length * options.repeat;
  let done = 0;
  try {
    for (const evalCase of options.cases) {
      const expected = await expectedOf(
        evalCase,
        async (text, values) => (await db.query<Record<string, unknown>>(text, values)).rows,
        params,
      );
      const asker = evalCase.member ? member!.asker : options;
      const runs: CaseRun[] = [];
      for (let attempt = 1; attempt <= options.repeat; attempt++) {
        const run = await runCase(options, asker, evalCase, expected, attempt, today);
        runs.push(run);
        options.onRun?.(run, ++done, total);
      }
      const passes = runs.filter((r) => r.passed).length;
      reports.push({
        id: evalCase.id,
        kind: evalCase.kind,
        expects: evalCase.expects,
        question: evalCase.question,
        ...(evalCase.followUps ? { followUps: evalCase.followUps } : {}),
        ...(evalCase.member ? { member: true } : {}),
        passed: passes === runs.length,
        passes,
        expected,
        runs,
      });
    }
  } finally {
    await member?.remove();
    await db.end();
  }
  return { summary: summarise(options, reports, startedAt, today), cases: reports };
}

/**
 * A member key under a policy of the spec's objects (row filters), for the member cases; removed
 * (key revoked, then policy deleted) when the eval ends.
 */
async function createMember(options: EvalOptions, spec: MemberSpec): Promise<{ asker: Asker; remove(): Promise<void> }> {
  const policy = `eval-member-${randomBytes(4).toString('hex')}`;
  await api(options, 'POST', '/api/v1/policies', {
    name: policy,
    description: 'npm run eval: what its member cases may see',
    objects: spec.objects,
  });
  let key: { id: string; secret: string };
  try {
    key = await api(options, 'POST', '/api/v1/api-keys', {
      name: `eval member (${policy})`,
      role: 'member',
      subject: spec.subject,
      ...(spec.attributes ? { attributes: spec.attributes } : {}),
      policies: [policy],
    });
  } catch (error) {
    await api(options, 'DELETE', `/api/v1/policies/${policy}`);
    throw error;
  }
  return {
    asker: { api: options.api, apiKey: key.secret },
    remove: async () => {
      await api(options, 'DELETE', `/api/v1/api-keys/${key.id}`);
      await api(options, 'DELETE', `/api/v1/policies/${policy}`);
    },
  };
}

async function runCase(
  options: EvalOptions,
  asker: Asker,
  evalCase: EvalCase,
  expected: Expected | null,
  attempt: number,
  today: string,
): Promise<CaseRun> {
  const started = performance.now();
  const run: CaseRun = {
    id: evalCase.id,
    attempt,
    passed: false,
    reasons: [],
    answer: '',
    grounding: null,
    figures: { referenced: 0, typed: 0 },
    toolCalls: 0,
    promptTokens: 0,
    completionTokens: 0,
    stepsWithoutUsage: 0,
    latencyMs: 0,
  };
  const sent = [openingMessage(evalCase.question, today), ...(evalCase.followUps ?? [])];
  const timeoutMs = options.caseTimeoutMs ?? 180_000;
  let failure: string | undefined;
  try {
    const chat = await api<ChatBody>(asker, 'POST', '/api/v1/chats', { agent: options.agent, message: sent[0] });
    run.chatId = chat.id;
    let final = await untilSettled(asker, chat.id, timeoutMs);
    for (const message of sent.slice(1)) {
      if (final.status !== 'waiting') break;
      await api(asker, 'POST', `/api/v1/chats/${chat.id}/messages`, { message });
      final = await untilSettled(asker, chat.id, timeoutMs);
    }
    run.latencyMs = performance.now() - started;
    const { messages } = await api<{ messages: MessageBody[] }>(asker, 'GET', `/api/v1/chats/${chat.id}/messages`);
    const assistants = messages.filter((m) => m.role === 'assistant');
    const answer = assistants.filter((m) => !m.metadata?.superseded).at(-1);
    run.answer = textOf(answer);
    run.grounding = answer?.metadata?.grounding ?? null;
    run.figures = figuresOf(run.grounding);
    run.toolCalls = assistants.reduce((n, m) => n + m.parts.filter((p) => p.type === 'tool-call').length, 0);
    for (const m of assistants) {
      run.promptTokens += m.usage?.promptTokens ?? 0;
      run.completionTokens += m.usage?.completionTokens ?? 0;
      if (!m.usage || m.usage.promptTokens + m.usage.completionTokens === 0) run.stepsWithoutUsage++;
    }
    if (final.status !== 'waiting') {
      failure = `chat ended ${final.status}${final.lastError ? `: ${final.lastError.code} ${final.lastError.message}` : ''}`;
    }
  } catch (error) {
    run.latencyMs = performance.now() - started;
    failure = (error as Error).message;
  }
  const observed: Observed = { answer: run.answer, grounding: run.grounding, toolCalls: run.toolCalls, asked: sent, failure };
  const graded = grade(evalCase, expected, observed);
  run.passed = graded.passed;
  run.reasons = graded.reasons;
  return run;
}

function textOf(message: MessageBody | undefined): string {
  return (message?.parts ?? []).map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('');
}

/** Polls the chat until it leaves pending/running (waiting, requires_action or error). */
async function untilSettled(asker: Asker, id: string, timeoutMs: number): Promise<ChatBody> {
  const until = Date.now() + timeoutMs;
  for (let wait = 20; ; wait = Math.min(wait * 2, 500)) {
    const chat = await api<ChatBody>(asker, 'GET', `/api/v1/chats/${id}`);
    if (chat.status !== 'pending' && chat.status !== 'running') return chat;
    if (Date.now() > until) throw new Error(`no answer within ${Math.round(timeoutMs / 1000)} s (status ${chat.status})`);
    await sleep(wait);
  }
}

async function api<T = unknown>(asker: Asker, method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(new URL(path, asker.api), {
    method,
    headers: { authorization: `Bearer ${asker.apiKey}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} → ${response.status} ${text.slice(0, 300)}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

function summarise(options: EvalOptions, cases: CaseReport[], startedAt: Date, today: string): EvalSummary {
  const runs = cases.flatMap((c) => c.runs);
  const passed = runs.filter((r) => r.passed).length;
  const mean = (values: number[]) => (values.length ? values.reduce((a, b) => a + b, 0) / values.length : 0);
  const promptTokens = runs.reduce((n, r) => n + r.promptTokens, 0);
  const completionTokens = runs.reduce((n, r) => n + r.completionTokens, 0);
  const byKind: Record<string, number> = {};
  for (const kind of [...new Set(cases.map((c) => c.kind))]) {
    const of = runs.filter((r) => cases.find((c) => c.id === r.id)?.kind === kind);
    byKind[kind] = round(of.filter((r) => r.passed).length / of.length);
  }
  const latencies = runs.map((r) => r.latencyMs).sort((a, b) => a - b);
  const [lo, hi] = wilsonInterval(passed, runs.length);
  return {
    model: options.model,
    agent: options.agent,
    today,
    cases: cases.length,
    repeat: options.repeat,
    accuracy: round(runs.length ? passed / runs.length : 0),
    accuracyInterval: [round(lo), round(hi)],
    passK: round(cases.length ? cases.filter((c) => c.passed).length / cases.length : 0),
    byKind,
    toolCalls: round(mean(runs.map((r) => r.toolCalls))),
    tokens: Math.round(mean(runs.map((r) => r.promptTokens + r.completionTokens))),
    promptTokens,
    completionTokens,
    stepsWithoutUsage: runs.reduce((n, r) => n + r.stepsWithoutUsage, 0),
    latencyP50: Math.round(percentile(latencies, 0.5)),
    latencyP95: Math.round(percentile(latencies, 0.95)),
    cost: options.price ? round((promptTokens * options.price.input + completionTokens * options.price.output) / 1e6, 6) : null,
    startedAt: startedAt.toISOString(),
    durationMs: Date.now() - startedAt.getTime(),
  };
}

/**
 * The Wilson score interval of a proportion (95% by default): unlike p ± z·√(p(1−p)/n) it stays
 * inside [0, 1] and is not zero-width at 0% or 100%.
 */
export function wilsonInterval(successes: number, trials: number, z = 1.959964): [number, number] {
  if (!trials) return [0, 1];
  const p = successes / trials;
  const z2 = z * z;
  const centre = (p + z2 / (2 * trials)) / (1 + z2 / trials);
  const half = (z * Math.sqrt((p * (1 - p)) / trials + z2 / (4 * trials * trials))) / (1 + z2 / trials);
  return [Math.max(0, centre - half), Math.min(1, centre + half)];
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

/** How many figures of an answer were references and how many typed (a grounding without a summary: all typed). */
export function figuresOf(grounding: Grounding | null): { referenced: number; typed: number } {
  if (!grounding) return { referenced: 0, typed: 0 };
  return grounding.summary
    ? { referenced: grounding.summary.referenced, typed: grounding.summary.typed }
    : { referenced: 0, typed: grounding.numbers };
}
