import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isPlainObject } from '../common/plain-object';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import type { WriteProposal } from '../tools/tool.types';

/** Where the generated key lives when APPROVAL_SECRET is unset. */
export const APPROVAL_SECRET_FILE = 'approval-secret';
const VERSION = 'v2';

/** What an approval token binds: a change is approved exactly as it was proposed, or not at all. */
export interface ApprovalBinding {
  /** The conversation the proposal was made in: a durable chat's id, or a front door's own scope (`mcp:…`, `v1:…`). */
  scope: string;
  toolCallId: string;
  /** The write tool the model called. */
  tool: string;
  /** The call's arguments as the model made them (hashed in canonical JSON). */
  arguments: unknown;
  /**
   * What the person is shown and what is written: the object, the operation, and every record's id, version
   * (ETag) and before/after values, in order (hashed in canonical JSON). A front door whose client hands the
   * proposal back (the OpenAI-compatible API) can then trust nothing in it that the token did not sign.
   */
  proposal: Pick<WriteProposal, 'objectName' | 'operation' | 'changes'>;
  /**
   * When verifying: the expiry the person was shown (ISO 8601), which must be the token's own, exactly as the
   * proposal stated it. A front door whose client hands the proposal back cannot then show a later one.
   */
  expiresAt?: string;
}

/**
 * Approval tokens: `v2.<expiry ms>.<HMAC-SHA256>` over the conversation (a chat id or a front door's scope),
 * the tool call id, the tool, the SHA-256 of the call's canonical arguments, the SHA-256 of the proposed
 * changes (every record's id, version, before and after) and the expiry. Stateless, so any replica with the
 * same key verifies them; that they are spent only once is the approval_tokens table's job.
 */
@Injectable()
export class ApprovalTokens implements OnModuleInit {
  private key?: Buffer;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  /** The key: APPROVAL_SECRET, or one generated once into DATA_DIR (kept across restarts). */
  async onModuleInit(): Promise<void> {
    if (this.config.approvalSecret) {
      this.key = Buffer.from(this.config.approvalSecret, 'utf8');
      return;
    }
    const file = join(this.config.dataDir, APPROVAL_SECRET_FILE);
    if (existsSync(file)) {
      this.key = Buffer.from((await readFile(file, 'utf8')).trim(), 'utf8');
      return;
    }
    const secret = randomBytes(32).toString('base64url');
    await mkdir(this.config.dataDir, { recursive: true });
    // wx: of two processes starting on one DATA_DIR at once, the second reads what the first wrote.
    await writeFile(file, secret + '\n', { mode: 0o600, flag: 'wx' }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
    await chmod(file, 0o600);
    this.key = Buffer.from((await readFile(file, 'utf8')).trim(), 'utf8');
  }

  /** A token for the binding, valid until `expiresAt`. */
  sign(binding: ApprovalBinding, expiresAt: Date): string {
    const expiry = String(expiresAt.getTime());
    return `${VERSION}.${expiry}.${this.mac(binding, expiry)}`;
  }

  /**
   * Whether `token` was signed by this server for exactly this binding (`valid`), its shown expiry (when the
   * binding has one) included, and whether it is past its expiry (`expired`, read from the signed token itself).
   */
  verify(token: unknown, binding: ApprovalBinding, now = Date.now()): { valid: boolean; expired: boolean } {
    if (typeof token !== 'string' || token.length > 200) return { valid: false, expired: false };
    const [version, expiry, mac, ...rest] = token.split('.');
    if (version !== VERSION || rest.length || !/^\d{1,15}$/.test(expiry ?? '') || !mac) return { valid: false, expired: false };
    const expected = Buffer.from(this.mac(binding, expiry), 'utf8');
    const given = Buffer.from(mac, 'utf8');
    const shown = binding.expiresAt === undefined || binding.expiresAt === new Date(Number(expiry)).toISOString();
    const valid = expected.length === given.length && timingSafeEqual(expected, given) && shown;
    return { valid, expired: valid && Number(expiry) <= now };
  }

  /**
   * A MAC of `text` under the same key, for another stateless credential of a front door (an MCP session id):
   * `purpose` separates it from approval tokens and from other uses, so one can never pass for another.
   */
  signText(purpose: string, text: string): string {
    return this.hmac(JSON.stringify([purpose, text]));
  }

  /** Whether `mac` is signText(purpose, text), compared in constant time. */
  verifyText(purpose: string, text: string, mac: string): boolean {
    const expected = Buffer.from(this.signText(purpose, text), 'utf8');
    const given = Buffer.from(mac, 'utf8');
    return expected.length === given.length && timingSafeEqual(expected, given);
  }

  /** What the spent-tokens table stores: never the token itself. */
  static hash(token: string): string {
    return createHash('sha256').update(token).digest('hex');
  }

  private mac(binding: ApprovalBinding, expiry: string): string {
    const { objectName, operation, changes } = binding.proposal;
    return this.hmac(
      JSON.stringify([
        VERSION,
        binding.scope,
        binding.toolCallId,
        binding.tool,
        sha256(canonicalJson(binding.arguments)),
        sha256(canonicalJson({ objectName, operation, changes })),
        expiry,
      ]),
    );
  }

  private hmac(message: string): string {
    if (!this.key) throw new Error('ApprovalTokens used before its key was loaded');
    return createHmac('sha256', this.key).update(message).digest('base64url');
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** JSON with every object's keys sorted: the same arguments give the same text, however they were ordered. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isPlainObject(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}
