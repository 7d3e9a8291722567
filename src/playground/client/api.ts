/** The server's error body: `{ error, code, details? }`. */
export interface ErrorBody {
  error: string;
  code: string;
  details?: unknown;
}

/** A non-2xx answer of the API, with the code the server gave (or `http_<status>` when the body had none). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function isErrorBody(value: unknown): value is ErrorBody {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as ErrorBody).error === 'string' &&
    typeof (value as ErrorBody).code === 'string'
  );
}

/** An error from the text of a failed response: the server's `{ error, code }` when it is one. */
export function apiErrorFromText(status: number, text: string): ApiError {
  try {
    const body: unknown = JSON.parse(text);
    if (isErrorBody(body)) return new ApiError(status, body.code, body.error);
  } catch {
    // Not JSON: a proxy's page or a dropped connection; the status says enough.
  }
  return new ApiError(status, `http_${status}`, text.slice(0, 300) || `The server answered ${status}`);
}

/** Calls the API with the key as a Bearer token; resolves with the JSON body, rejects with ApiError. */
export async function apiGet<T>(key: string, path: string, signal?: AbortSignal): Promise<T> {
  let response: Response;
  try {
    response = await fetch(path, { headers: { Authorization: `Bearer ${key}`, Accept: 'application/json' }, signal });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw new ApiError(0, 'network_error', 'The server could not be reached');
  }
  const text = await response.text();
  if (!response.ok) throw apiErrorFromText(response.status, text);
  return JSON.parse(text) as T;
}

/** Path of one of the API's resources, every name segment URL-encoded. */
export function apiPath(...segments: string[]): string {
  return '/api/v1/' + segments.map((segment) => encodeURIComponent(segment)).join('/');
}

export interface AgentSummary {
  name: string;
  label: string;
  role: string;
  active: boolean;
}

export interface ObjectSummary {
  name: string;
  label: string;
  description?: string;
  fieldCount: number;
}

export interface FieldSummary {
  name: string;
  label: string;
  type: string;
}

export interface ObjectDescription {
  name: string;
  label: string;
  fields: FieldSummary[];
}

export interface RecordPage {
  records: Array<Record<string, unknown>>;
  total: number;
  /** false when total is the database's estimate (beyond RECORDS_COUNT_CAP). */
  totalExact: boolean;
  limit: number;
  offset: number;
  /** null on the last page. */
  nextCursor: string | null;
}
