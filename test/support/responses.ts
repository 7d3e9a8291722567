import type { Response as AgentResponse } from 'superagent';
import type { Response } from 'supertest';
import type { ErrorBody } from '../../src/common/http-exception.filter';
import type { RecordListResponse } from '../../src/records/records.dto';

/**
 * A response's parsed JSON body, as the type the endpoint answers with (its response DTO, e.g.
 * `ChatResponse`, `ObjectResponse`). supertest types every body `any`; naming the type here lets
 * the type checker follow what the test reads.
 */
export function bodyOf<T>(res: Response): T {
  return res.body as T;
}

/**
 * The body of a failed request, as HttpExceptionFilter writes it. `D` is the shape of `details`
 * for a test that reads into them (each error code carries its own).
 */
export function errorOf<D = unknown>(res: Response): ErrorBody & { details: D } {
  return res.body as ErrorBody & { details: D };
}

/**
 * One record as the records API returns it (the API has no DTO for a record: its fields are the
 * object's). `id` is always there; `created_at`, `updated_at` and the object's fields unless a
 * `fields` projection left them out.
 */
export interface RecordBody {
  id: string;
  [field: string]: unknown;
}

/** A page of GET /objects/:name/records, with its records as {@link RecordBody}. */
export interface RecordPage extends RecordListResponse {
  records: RecordBody[];
}

/** The `id` of what a response carries: a created record, chat, API key, ... */
export function idOf(res: Response): string {
  return bodyOf<{ id: string }>(res).id;
}

/**
 * A supertest parser that keeps the body as one string, for event streams:
 * `.buffer(true).parse(rawText)`, then `res.body` is the text.
 */
export function rawText(res: AgentResponse, done: (error: Error | null, body: unknown) => void): void {
  let data = '';
  res.on('data', (chunk: Buffer) => (data += chunk.toString()));
  res.on('end', () => done(null, data));
}
