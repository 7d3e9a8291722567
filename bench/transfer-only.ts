/**
 * `npm run bench:transfer`: CSV export of 1,000,000 rows (throughput and the app's RSS growth) and a
 * CSV import of 100,000 rows through a job (time to done); replaces that section of BENCHMARKS.md.
 */
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { AppProcess, log, sql } from './harness';
import { HttpClient } from './load';
import type { Goal } from './results';
import { runSection } from './section';

const TRANSFER_START = '<!-- transfer:start -->';
const TRANSFER_END = '<!-- transfer:end -->';
const EXPORT_ROWS = 1_000_000;
const IMPORT_ROWS = 100_000;

interface TransferResult {
  exportRows: number;
  exportBytes: number;
  exportSeconds: number;
  rssBeforeMb: number;
  rssPeakMb: number;
  importRows: number;
  importSeconds: number;
  importWritten: number;
}

const FIELDS = [
  { name: 'sku', label: 'SKU', type: 'text' },
  { name: 'qty', label: 'Quantity', type: 'integer' },
  { name: 'amount', label: 'Amount', type: 'currency' },
  { name: 'active', label: 'Active', type: 'boolean' },
  { name: 'due', label: 'Due', type: 'date' },
  { name: 'notes', label: 'Notes', type: 'textarea' },
];

async function transferRun(
  admin: HttpClient,
  port: number,
  secret: string,
  databaseUrl: string,
  app: AppProcess,
): Promise<TransferResult> {
  for (const name of ['bench_export', 'bench_import']) {
    await admin.json({ method: 'POST', path: '/api/v1/objects', body: { name, label: name, fields: FIELDS } }, 201);
  }
  await sql(
    databaseUrl,
    `insert into "data"."bench_export" ("sku", "qty", "amount", "active", "due", "notes")
     select 'sku-' || g, g % 1000, (g % 100000) / 100.0, g % 2 = 0, date '2026-01-01' + (g % 365),
            case when g % 10 = 0 then 'a note, with "quotes"' else null end
     from generate_series(1, ${EXPORT_ROWS}) g`,
  );
  await sql(databaseUrl, 'analyze "data"."bench_export"');
  log(`filled bench_export with ${EXPORT_ROWS} rows`);
  const rssBefore = (await app.memory('before export')).rss;
  let rssPeak = rssBefore;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      rssPeak = Math.max(rssPeak, (await app.memory('during export')).rss);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  })();
  const started = performance.now();
  const { bytes, lines } = await new Promise<{ bytes: number; lines: number }>((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/api/v1/objects/bench_export/records/export.csv',
        headers: { authorization: `Bearer ${secret}` },
      },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`export answered ${res.statusCode}`));
        let total = 0;
        let newlines = 0;
        res.on('data', (chunk: Buffer) => {
          total += chunk.length;
          for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) newlines++;
        });
        res.on('end', () => resolve({ bytes: total, lines: newlines }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
  const exportSeconds = (performance.now() - started) / 1000;
  sampling = false;
  await sampler;
  log(`exported ${lines - 1} rows in ${exportSeconds.toFixed(1)} s`);

  const csv = ['sku,qty,amount,active,due,notes'];
  for (let i = 0; i < IMPORT_ROWS; i++)
    csv.push(
      `imp-${i},${i % 1000},${(i % 10000) / 100},${i % 2 === 0},2026-02-${String((i % 28) + 1).padStart(2, '0')},"row ${i}, imported"`,
    );
  const body = csv.join('\n') + '\n';
  const importStarted = performance.now();
  const { jobId } = await postCsv(port, secret, '/api/v1/objects/bench_import/import', body);
  let job: { status: string; rowsWritten: number };
  for (;;) {
    job = await admin.json<{ status: string; rowsWritten: number }>({ method: 'GET', path: `/api/v1/jobs/${jobId}` }, 200);
    if (job.status !== 'running') break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const importSeconds = (performance.now() - importStarted) / 1000;
  log(`imported ${job.rowsWritten} rows in ${importSeconds.toFixed(1)} s (${job.status})`);
  return {
    exportRows: lines - 1,
    exportBytes: bytes,
    exportSeconds,
    rssBeforeMb: rssBefore / 2 ** 20,
    rssPeakMb: rssPeak / 2 ** 20,
    importRows: IMPORT_ROWS,
    importSeconds,
    importWritten: job.rowsWritten,
  };
}

/** POSTs a CSV body; the 202's job id. */
function postCsv(port: number, secret: string, path: string, body: string): Promise<{ jobId: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path,
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'text/csv', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          res.statusCode === 202
            ? resolve(JSON.parse(text) as { jobId: string })
            : reject(new Error(`import answered ${res.statusCode}: ${text}`)),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function transferGoals(r: TransferResult): Goal[] {
  const rate = r.exportRows / r.exportSeconds;
  const growth = r.rssPeakMb - r.rssBeforeMb;
  return [
    {
      name: 'Export: 1,000,000 rows as CSV, rows/s',
      target: '>= 100,000',
      measured: Math.round(rate).toLocaleString('en-US'),
      met: r.exportRows === EXPORT_ROWS && rate >= 100_000,
    },
    {
      name: "Export: the app's RSS growth while streaming",
      target: '<= 100 MB',
      measured: `${growth.toFixed(0)} MB`,
      met: growth <= 100,
    },
    {
      name: 'Import: 100,000 rows through a job, to done',
      target: '<= 10 s',
      measured: `${r.importSeconds.toFixed(1)} s`,
      met: r.importWritten === IMPORT_ROWS && r.importSeconds <= 10,
    },
  ];
}

function renderTransfer(r: TransferResult, run: { command: string; date: string; machine?: string }): string[] {
  return [
    TRANSFER_START,
    '',
    '## CSV export and import',
    '',
    `- Run: \`${run.command}\`, ${run.date}${run.machine ? `; ${run.machine}` : ''}`,
    `- Export: \`GET .../records/export.csv\` of ${r.exportRows.toLocaleString('en-US')} rows (6 fields and the 3 system ones,`,
    `  ${(r.exportBytes / 2 ** 20).toFixed(0)} MB) read by one client as fast as it can; the app's RSS sampled every 0.5 s`,
    `  (${r.rssBeforeMb.toFixed(0)} MB before, ${r.rssPeakMb.toFixed(0)} MB at most). Import: a ${r.importRows.toLocaleString('en-US')}-row CSV`,
    '  posted to `.../import` (all or nothing), timed from the request to the job reading `done`.',
    '',
    '| goal | target | measured | status |',
    '|---|---|---|---|',
    ...transferGoals(r).map((g) => `| ${g.name} | ${g.target} | ${g.measured} | ${g.met ? 'met' : '**NOT met**'} |`),
    '',
    TRANSFER_END,
  ];
}

runSection({
  command: 'npm run bench:transfer',
  title: 'transfer',
  seed: false,
  markers: { start: TRANSFER_START, end: TRANSFER_END },
  run: ({ admin, port, secret, databaseUrl, app }) => transferRun(admin, port, secret, databaseUrl, app),
  render: renderTransfer,
  goals: transferGoals,
});
