import { HttpStatus } from '@nestjs/common';

/**
 * The one table from domain error codes to HTTP statuses. A code not listed is a 400: domain
 * errors describe something the caller can fix.
 */
export const ERROR_STATUS: Record<string, HttpStatus> = {
  unauthorized: HttpStatus.UNAUTHORIZED,
  forbidden: HttpStatus.FORBIDDEN,
  agent_inactive: HttpStatus.FORBIDDEN,
  agent_forbidden: HttpStatus.FORBIDDEN,
  tool_not_allowed: HttpStatus.FORBIDDEN,
  object_not_allowed: HttpStatus.FORBIDDEN,
  not_found: HttpStatus.NOT_FOUND,
  route_not_found: HttpStatus.NOT_FOUND,
  object_not_found: HttpStatus.NOT_FOUND,
  field_not_found: HttpStatus.NOT_FOUND,
  record_not_found: HttpStatus.NOT_FOUND,
  api_key_not_found: HttpStatus.NOT_FOUND,
  agent_not_found: HttpStatus.NOT_FOUND,
  tool_not_found: HttpStatus.NOT_FOUND,
  chat_not_found: HttpStatus.NOT_FOUND,
  object_exists: HttpStatus.CONFLICT,
  field_exists: HttpStatus.CONFLICT,
  agent_exists: HttpStatus.CONFLICT,
  object_referenced: HttpStatus.CONFLICT,
  object_in_use: HttpStatus.CONFLICT,
  options_in_use: HttpStatus.CONFLICT,
  record_referenced: HttpStatus.CONFLICT,
  unique_violation: HttpStatus.CONFLICT,
  last_admin_key: HttpStatus.CONFLICT,
  chat_busy: HttpStatus.CONFLICT,
  metadata_changed: HttpStatus.CONFLICT,
  chat_not_waiting_for_tools: HttpStatus.CONFLICT,
  payload_too_large: HttpStatus.PAYLOAD_TOO_LARGE,
  rate_limited: HttpStatus.TOO_MANY_REQUESTS,
  unsupported_media_type: HttpStatus.UNSUPPORTED_MEDIA_TYPE,
  query_timeout: HttpStatus.SERVICE_UNAVAILABLE,
  tool_timeout: HttpStatus.GATEWAY_TIMEOUT,
  database_unavailable: HttpStatus.SERVICE_UNAVAILABLE,
  llm_not_configured: HttpStatus.SERVICE_UNAVAILABLE,
  llm_rate_limited: HttpStatus.TOO_MANY_REQUESTS,
  llm_timeout: HttpStatus.GATEWAY_TIMEOUT,
  llm_auth_failed: HttpStatus.BAD_GATEWAY,
  llm_bad_request: HttpStatus.BAD_GATEWAY,
  llm_unavailable: HttpStatus.BAD_GATEWAY,
  llm_invalid_response: HttpStatus.BAD_GATEWAY,
  llm_aborted: HttpStatus.SERVICE_UNAVAILABLE,
  agent_timeout: HttpStatus.GATEWAY_TIMEOUT,
  turn_aborted: HttpStatus.SERVICE_UNAVAILABLE,
  internal_error: HttpStatus.INTERNAL_SERVER_ERROR,
};

export function statusForCode(code: string): HttpStatus {
  return ERROR_STATUS[code] ?? HttpStatus.BAD_REQUEST;
}
