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
    /** The error body's `details`, when it had some (the conflicts of a revert, for one). */
    readonly details?: unknown,
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
    if (isErrorBody(body)) return new ApiError(status, body.code, body.error, body.details);
  } catch {
    // Not JSON: a proxy's page or a dropped connection; the status says enough.
  }
  return new ApiError(status, `http_${status}`, text.slice(0, 300) || `The server answered ${status}`);
}

/** A request beyond a plain GET: a method, a JSON body, extra headers (If-Match, If-None-Match). */
export interface ApiRequest {
  method?: string;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** A 2xx answer: its JSON body (undefined for 204) and headers (the ETag of a record, for one). */
export interface ApiResponse<T> {
  body: T;
  headers: Headers;
}

/** Calls the API with the key as a Bearer token; resolves with the answer, rejects with ApiError. */
export async function apiSend<T>(key: string, path: string, request: ApiRequest = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { Authorization: `Bearer ${key}`, Accept: 'application/json', ...request.headers };
  if (request.body !== undefined) headers['Content-Type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(path, {
      method: request.method ?? 'GET',
      headers,
      body: request.body === undefined ? undefined : JSON.stringify(request.body),
      signal: request.signal,
    });
  } catch (error) {
    if (request.signal?.aborted) throw error;
    throw new ApiError(0, 'network_error', 'The server could not be reached');
  }
  const text = await response.text();
  if (!response.ok) throw apiErrorFromText(response.status, text);
  return { body: (text ? JSON.parse(text) : undefined) as T, headers: response.headers };
}

/** GETs a resource of the API; resolves with its JSON body, rejects with ApiError. */
export async function apiGet<T>(key: string, path: string, signal?: AbortSignal): Promise<T> {
  return (await apiSend<T>(key, path, { signal })).body;
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
