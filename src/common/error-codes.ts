import { HttpStatus } from '@nestjs/common';

/** 431, which Nest's HttpStatus does not list. */
const REQUEST_HEADER_FIELDS_TOO_LARGE = 431 as HttpStatus;

/**
 * Every error code the server produces, with its HTTP status. `DomainError` and tool error
 * results accept only these keys, so a new or misspelt code fails to compile instead of
 * silently becoming a 400.
 */
export const ERRORS = {
  // Authentication and access.
  unauthorized: HttpStatus.UNAUTHORIZED,
  forbidden: HttpStatus.FORBIDDEN,
  agent_inactive: HttpStatus.FORBIDDEN,
  agent_forbidden: HttpStatus.FORBIDDEN,
  tool_not_allowed: HttpStatus.FORBIDDEN,
  object_not_allowed: HttpStatus.FORBIDDEN,
  // An approval of a write proposal with a bad, forged, replayed or expired token, or from a key that may not
  // make the write itself: nothing is written.
  approval_invalid: HttpStatus.FORBIDDEN,
  // The key a chat turn runs as was revoked (or no longer acts for the chat's owner): the turn stops. Mostly a chat's
  // lastError; as a response, only when a key is revoked while its request is being admitted.
  key_revoked: HttpStatus.UNAUTHORIZED,
  // A bearer JWT refused: bad signature or algorithm, unknown issuer, wrong audience, expired, no subject, or a revoked
  // user. The response never says which (the server's log does): a forger learns nothing from it.
  invalid_token: HttpStatus.UNAUTHORIZED,
  // The identity provider's discovery document or keys could not be fetched to check a token; sent with Retry-After.
  identity_provider_unavailable: HttpStatus.SERVICE_UNAVAILABLE,

  // The request itself: body, query, JSON, framework errors.
  bad_request: HttpStatus.BAD_REQUEST,
  validation_failed: HttpStatus.BAD_REQUEST,
  invalid_json: HttpStatus.BAD_REQUEST,
  payload_too_large: HttpStatus.PAYLOAD_TOO_LARGE,
  unsupported_media_type: HttpStatus.UNSUPPORTED_MEDIA_TYPE,
  // Too many requests of one API key per minute (RATE_LIMIT_PER_MINUTE), or too many failed authentications
  // of one client address; sent with Retry-After.
  rate_limited: HttpStatus.TOO_MANY_REQUESTS,
  // The key's or the agent's model tokens of the day are spent; sent with Retry-After (the next UTC midnight).
  quota_exceeded: HttpStatus.TOO_MANY_REQUESTS,
  // Per-key caps on durable chats in flight and on open event streams; sent with Retry-After.
  too_many_chats: HttpStatus.TOO_MANY_REQUESTS,
  too_many_streams: HttpStatus.TOO_MANY_REQUESTS,
  // Caps on CSV exports streaming at once, per key and per replica; sent with Retry-After.
  too_many_exports: HttpStatus.TOO_MANY_REQUESTS,
  // Per-key cap on unexpired stream tokens; sent with Retry-After (when the oldest one expires).
  too_many_stream_tokens: HttpStatus.TOO_MANY_REQUESTS,
  // Per-key cap on MCP write confirmations waiting for their answer (a tool result, nothing proposed).
  too_many_confirmations: HttpStatus.TOO_MANY_REQUESTS,
  conflict: HttpStatus.CONFLICT,
  // If-Match that is not "*" or a list of entity tags.
  invalid_if_match: HttpStatus.BAD_REQUEST,
  // Refused by Node's HTTP parser or Fastify's router before any route runs (framework-errors.ts).
  malformed_request: HttpStatus.BAD_REQUEST,
  invalid_url: HttpStatus.BAD_REQUEST,
  uri_too_long: HttpStatus.URI_TOO_LONG,
  headers_too_large: REQUEST_HEADER_FIELDS_TOO_LARGE,
  request_timeout: HttpStatus.REQUEST_TIMEOUT,
  expectation_failed: HttpStatus.EXPECTATION_FAILED,

  // Missing things.
  route_not_found: HttpStatus.NOT_FOUND,
  object_not_found: HttpStatus.NOT_FOUND,
  field_not_found: HttpStatus.NOT_FOUND,
  record_not_found: HttpStatus.NOT_FOUND,
  api_key_not_found: HttpStatus.NOT_FOUND,
  user_not_found: HttpStatus.NOT_FOUND,
  agent_not_found: HttpStatus.NOT_FOUND,
  tool_not_found: HttpStatus.NOT_FOUND,
  chat_not_found: HttpStatus.NOT_FOUND,
  // A tool call of a chat that is not there, holds no data, or whose result was produced under other access.
  receipt_not_found: HttpStatus.NOT_FOUND,
  policy_not_found: HttpStatus.NOT_FOUND,
  metric_not_found: HttpStatus.NOT_FOUND,
  job_not_found: HttpStatus.NOT_FOUND,
  // No view of that name on the object that the caller may see (its own or a shared one).
  view_not_found: HttpStatus.NOT_FOUND,
  // A change set that does not exist or that the caller may not see; a version a record's history does not hold.
  change_set_not_found: HttpStatus.NOT_FOUND,
  version_not_found: HttpStatus.NOT_FOUND,
  // A webhook that does not exist or that the caller does not own (admins see every one); a delivery not of it.
  webhook_not_found: HttpStatus.NOT_FOUND,
  delivery_not_found: HttpStatus.NOT_FOUND,
  // A schedule that does not exist or that the caller does not own (admins see every one).
  schedule_not_found: HttpStatus.NOT_FOUND,

  // Conflicts with the current state.
  object_exists: HttpStatus.CONFLICT,
  field_exists: HttpStatus.CONFLICT,
  agent_exists: HttpStatus.CONFLICT,
  policy_exists: HttpStatus.CONFLICT,
  metric_exists: HttpStatus.CONFLICT,
  view_exists: HttpStatus.CONFLICT,
  // A metric that a ratio metric divides cannot be deleted (or stop being a simple metric of its object).
  metric_in_use: HttpStatus.CONFLICT,
  // A field that a metric reads (measure, filter, time field, dimension) cannot be deleted.
  // ... or that a saved view names (filter, order, fields, group).
  field_in_use: HttpStatus.CONFLICT,
  // A policy that API keys still run under cannot be deleted: those keys would silently get every member right.
  policy_in_use: HttpStatus.CONFLICT,
  object_referenced: HttpStatus.CONFLICT,
  object_in_use: HttpStatus.CONFLICT,
  options_in_use: HttpStatus.CONFLICT,
  record_referenced: HttpStatus.CONFLICT,
  unique_violation: HttpStatus.CONFLICT,
  last_admin_key: HttpStatus.CONFLICT,
  chat_busy: HttpStatus.CONFLICT,
  metadata_changed: HttpStatus.CONFLICT,
  chat_not_waiting_for_tools: HttpStatus.CONFLICT,
  // A client chat id already names a chat of the same key with another agent.
  chat_agent_mismatch: HttpStatus.CONFLICT,
  // Cancelling a job that has already ended (done, failed or cancelled).
  job_finished: HttpStatus.CONFLICT,
  // A revert whose records changed since its change set: details.records names each field, expected and current.
  revert_conflict: HttpStatus.CONFLICT,
  // A change set with more records than one revert writes (REVERT_MAX_RECORDS).
  change_set_too_large: HttpStatus.PAYLOAD_TOO_LARGE,
  // The record changed since the version the client sent in If-Match.
  precondition_failed: HttpStatus.PRECONDITION_FAILED,
  // A change-feed cursor older than the retention kept: changes after it are gone, so the client reloads.
  cursor_expired: HttpStatus.GONE,

  // Metadata definitions.
  invalid_name: HttpStatus.BAD_REQUEST,
  reserved_name: HttpStatus.BAD_REQUEST,
  invalid_identifier: HttpStatus.BAD_REQUEST,
  invalid_field_type: HttpStatus.BAD_REQUEST,
  duplicate_field: HttpStatus.BAD_REQUEST,
  too_many_fields: HttpStatus.BAD_REQUEST,
  missing_options: HttpStatus.BAD_REQUEST,
  invalid_options: HttpStatus.BAD_REQUEST,
  unexpected_options: HttpStatus.BAD_REQUEST,
  missing_reference: HttpStatus.BAD_REQUEST,
  unknown_reference: HttpStatus.BAD_REQUEST,
  unexpected_reference: HttpStatus.BAD_REQUEST,
  invalid_unique: HttpStatus.BAD_REQUEST,
  // searchable on a field that is not text-like.
  invalid_searchable: HttpStatus.BAD_REQUEST,
  object_not_empty: HttpStatus.BAD_REQUEST,
  field_has_empty_values: HttpStatus.BAD_REQUEST,
  field_values_too_long: HttpStatus.BAD_REQUEST,

  // Records, queries and aggregations.
  invalid_record: HttpStatus.BAD_REQUEST,
  // A CSV import: a header column that names no field, a bad mapping, a malformed CSV file.
  invalid_csv: HttpStatus.BAD_REQUEST,
  // An import's upload sent nothing for IMPORT_STALL_TIMEOUT_MS while the import waited for it.
  upload_stalled: HttpStatus.REQUEST_TIMEOUT,
  unknown_column: HttpStatus.BAD_REQUEST,
  invalid_mapping: HttpStatus.BAD_REQUEST,
  invalid_operation: HttpStatus.BAD_REQUEST,
  unknown_field: HttpStatus.BAD_REQUEST,
  read_only_field: HttpStatus.BAD_REQUEST,
  missing_required_field: HttpStatus.BAD_REQUEST,
  invalid_value: HttpStatus.BAD_REQUEST,
  invalid_option: HttpStatus.BAD_REQUEST,
  invalid_reference: HttpStatus.BAD_REQUEST,
  invalid_fields: HttpStatus.BAD_REQUEST,
  invalid_where: HttpStatus.BAD_REQUEST,
  invalid_operator: HttpStatus.BAD_REQUEST,
  too_many_values: HttpStatus.BAD_REQUEST,
  invalid_order_by: HttpStatus.BAD_REQUEST,
  invalid_cursor: HttpStatus.BAD_REQUEST,
  // ?q= on an object with no searchable field.
  search_not_available: HttpStatus.BAD_REQUEST,
  invalid_policy: HttpStatus.BAD_REQUEST,
  // A metric definition that does not fit its object's fields; the message names the bad part.
  invalid_metric: HttpStatus.BAD_REQUEST,
  // query_metric arguments the metrics cannot answer (a dimension they do not have, no time field for a grain, ...).
  invalid_metric_query: HttpStatus.BAD_REQUEST,
  invalid_group_by: HttpStatus.BAD_REQUEST,
  invalid_aggregation: HttpStatus.BAD_REQUEST,
  invalid_aggregate_function: HttpStatus.BAD_REQUEST,
  read_only_transaction: HttpStatus.BAD_REQUEST,
  query_timeout: HttpStatus.SERVICE_UNAVAILABLE,
  // The caller left (or its tool call was stopped) while its query ran; the statement was cancelled.
  query_cancelled: HttpStatus.SERVICE_UNAVAILABLE,

  // Agents, chats and tools.
  unknown_tool: HttpStatus.BAD_REQUEST,
  invalid_message: HttpStatus.BAD_REQUEST,
  // An AI SDK trigger a durable chat does not take (regenerate-message: its history is append-only).
  unsupported_trigger: HttpStatus.BAD_REQUEST,
  // A webhook URL that is not http(s), does not resolve, or points at a private, loopback or link-local address
  // (refused unless WEBHOOK_ALLOW_PRIVATE=true).
  webhook_url_refused: HttpStatus.BAD_REQUEST,
  // A schedule's cron that is not 5 fields a cron parser accepts; a time zone that is not an IANA zone; a schedule
  // otherwise unusable (neither or both of cron and every, an interval below SCHEDULE_MIN_INTERVAL_S, a condition the
  // metric cannot take).
  invalid_cron: HttpStatus.BAD_REQUEST,
  invalid_timezone: HttpStatus.BAD_REQUEST,
  invalid_schedule: HttpStatus.BAD_REQUEST,
  // A delivery that is still waiting for an attempt cannot be redelivered.
  delivery_pending: HttpStatus.CONFLICT,
  invalid_dynamic_tools: HttpStatus.BAD_REQUEST,
  invalid_tool_results: HttpStatus.BAD_REQUEST,
  invalid_arguments: HttpStatus.BAD_REQUEST,
  // A request parameter this server does not offer (OpenAI-compatible API: n > 1, logprobs, audio, ...).
  unsupported_parameter: HttpStatus.BAD_REQUEST,
  ask_user_unavailable: HttpStatus.BAD_REQUEST,
  // calculate: an expression that does not parse or has no finite value; a number no earlier data result of the turn holds.
  invalid_expression: HttpStatus.BAD_REQUEST,
  // A formula field that reads itself through other formulas (details.path).
  computed_cycle: HttpStatus.BAD_REQUEST,
  /** A rollup, count or lookup_value definition that does not fit the objects it names. */
  invalid_computed_field: HttpStatus.BAD_REQUEST,
  /** A rollup function that does not fit the field's type (sum of a text, ...). */
  invalid_rollup_function: HttpStatus.BAD_REQUEST,
  /** `stored: true` on a computed field: only computed when read, for now. */
  stored_not_supported: HttpStatus.BAD_REQUEST,
  /** A links field's `inverse` name that the target object already has. */
  invalid_inverse: HttpStatus.BAD_REQUEST,
  unsupported_operand: HttpStatus.BAD_REQUEST,
  // visualize: no earlier data result of the turn has this call id; a column not in its rows, or text as a measure.
  unknown_chart_source: HttpStatus.BAD_REQUEST,
  invalid_chart: HttpStatus.BAD_REQUEST,
  // GET /chats/:id/charts/:toolCallId.svg: no chart of that call in the caller's chat (or one it may not see).
  chart_not_found: HttpStatus.NOT_FOUND,
  agent_timeout: HttpStatus.GATEWAY_TIMEOUT,
  turn_aborted: HttpStatus.SERVICE_UNAVAILABLE,
  tool_timeout: HttpStatus.GATEWAY_TIMEOUT,
  // The pinned messages and the current turn alone exceed the agent's context budget (model.contextTokens).
  context_too_large: HttpStatus.BAD_REQUEST,

  // Only in tool results and a chat's lastError, never an HTTP response of their own.
  tool_aborted: HttpStatus.BAD_REQUEST,
  tool_failed: HttpStatus.BAD_REQUEST,
  tool_results_timeout: HttpStatus.BAD_REQUEST,
  // A tool call reusing the id of an earlier call of the same model step: refused unrun (the model reads why).
  duplicate_tool_call_id: HttpStatus.BAD_REQUEST,
  interrupted: HttpStatus.BAD_REQUEST,
  // Write proposals: what the model reads when a person rejected one, it expired unanswered, a record changed
  // since it was proposed (nothing written), a write tool matched more records (or values) than one proposal may
  // change, or a client tool was called in the same step as a write (not run: one pause at a time).
  approval_rejected: HttpStatus.BAD_REQUEST,
  approval_expired: HttpStatus.BAD_REQUEST,
  version_changed: HttpStatus.CONFLICT,
  too_many_records: HttpStatus.BAD_REQUEST,
  proposal_too_large: HttpStatus.BAD_REQUEST,
  write_not_allowed: HttpStatus.FORBIDDEN,
  tool_not_run: HttpStatus.BAD_REQUEST,

  // The model endpoint.
  llm_not_configured: HttpStatus.SERVICE_UNAVAILABLE,
  llm_rate_limited: HttpStatus.TOO_MANY_REQUESTS,
  llm_timeout: HttpStatus.GATEWAY_TIMEOUT,
  llm_auth_failed: HttpStatus.BAD_GATEWAY,
  llm_bad_request: HttpStatus.BAD_GATEWAY,
  // The endpoint said the conversation exceeds the model's context window: like context_too_large, and like
  // OpenAI's own answer to it, a 400 that retrying cannot fix (lower model.contextTokens, shorten the conversation).
  llm_context_length: HttpStatus.BAD_REQUEST,
  llm_unavailable: HttpStatus.BAD_GATEWAY,
  llm_invalid_response: HttpStatus.BAD_GATEWAY,
  llm_aborted: HttpStatus.SERVICE_UNAVAILABLE,

  // The server itself.
  database_unavailable: HttpStatus.SERVICE_UNAVAILABLE,
  // GET /health/ready: a check failed (details.checks says which).
  not_ready: HttpStatus.SERVICE_UNAVAILABLE,
  shutting_down: HttpStatus.SERVICE_UNAVAILABLE,
  // Every connection of the data engine stayed taken for DB_ACQUIRE_TIMEOUT_MS; sent with Retry-After.
  database_busy: HttpStatus.SERVICE_UNAVAILABLE,
  internal_error: HttpStatus.INTERNAL_SERVER_ERROR,
} as const satisfies Record<string, HttpStatus>;

export type ErrorCode = keyof typeof ERRORS;

export function statusForCode(code: ErrorCode): HttpStatus {
  return ERRORS[code];
}
