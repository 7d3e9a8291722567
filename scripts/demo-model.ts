/**
 * A stand-in for an OpenAI-compatible model, for trying the chat endpoints by hand without an API
 * key: `npm run demo-model`, then start the server with OPENAI_BASE_URL=http://127.0.0.1:4010/v1.
 * It plays a tiny analyst: asked anything, it calls aggregate_data (deals by stage), then answers
 * with a table built from the tool result it received, each figure a reference to its cell. Not a model; nothing
 * is generated.
 */
import { MockLlmServer, RecordedRequest } from '../test/support/mock-llm.server';

const PORT = Number(process.env.DEMO_MODEL_PORT ?? 4010);

function answer(request: RecordedRequest) {
  const messages = (request.body?.messages ?? []) as Array<{ role: string; content?: string }>;
  const toolMessage = [...messages].reverse().find((m) => m.role === 'tool');
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  const afterUser = toolMessage && messages.lastIndexOf(toolMessage) > messages.lastIndexOf(lastUser!);
  if (!afterUser) {
    return {
      kind: 'toolCalls' as const,
      toolCalls: [
        {
          name: 'aggregate_data',
          arguments: {
            objectName: 'deal',
            groupBy: ['stage'],
            aggregations: [
              { function: 'count', alias: 'deals' },
              { function: 'sum', field: 'amount', alias: 'total_amount' },
            ],
            orderBy: [{ field: 'total_amount', order: 'desc' }],
          },
        },
      ],
    };
  }
  let rows: Array<{ ref?: string; stage: string | null; deals: number; total_amount: number | null }>;
  try {
    rows = (JSON.parse(toolMessage.content ?? '{}') as { rows?: typeof rows }).rows ?? [];
  } catch {
    return { kind: 'text' as const, content: `The tool failed: ${toolMessage.content}` };
  }
  // As data_chat asks: each figure a reference to its cell ({{r1.2.deals}}), which the server fills in.
  const lines = rows.map((r) =>
    r.ref
      ? `| ${r.stage} | {{${r.ref}.deals}} | {{${r.ref}.total_amount}} |`
      : `| ${r.stage} | ${r.deals} | ${Number(r.total_amount ?? 0).toLocaleString('en-US')} |`,
  );
  return {
    kind: 'text' as const,
    content: ['Deals by stage:', '', '| stage | deals | total amount |', '|---|---|---|', ...lines].join('\n'),
  };
}

async function main(): Promise<void> {
  const server = await MockLlmServer.start({ port: PORT });
  // Every request gets the same scripted behaviour.
  const refill = () => server.enqueue(...Array.from({ length: 100 }, () => answer));
  refill();
  setInterval(() => {
    if (server.pendingSteps < 50) refill();
  }, 1000).unref();
  process.stdout.write(`demo model listening on ${server.url} (set OPENAI_BASE_URL to it)\n`);
  const stop = () => void server.close().then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  await new Promise(() => undefined);
}

void main();
