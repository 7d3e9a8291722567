import { EntityManager } from '@mikro-orm/postgresql';
import { Inject, Injectable, Logger, OnApplicationBootstrap, BeforeApplicationShutdown } from '@nestjs/common';
import { ChatService, type SettledProposal } from '../chats/durable/chat.service';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { ApprovalStatements } from '../writes/approval.repository';
import { decisionEntry, expiredOutcome } from '../writes/approved-writes.service';
import { proposalRef, settled } from './approval.service';
import type { PendingToolCall } from '../chats/durable/chat.types';
import type { WriteProposal } from '../tools/tool.types';

/**
 * Proposals nobody decided on in time. Every replica sweeps, with the chat worker's heartbeat interval:
 * a chat whose earliest proposal expired is locked (skipping chats a decision holds), and each expired
 * proposal gets its result for the model: `approval_expired`, or, when its token was spent by an approval
 * whose write committed but whose chat update did not (a replica stopped in between), what that write did.
 * An approval that arrives after the expiry is refused and settles the proposal the same way at once.
 */
@Injectable()
export class ApprovalExpiry implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(ApprovalExpiry.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly em: EntityManager,
    private readonly chats: ChatService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => {
      this.running ??= this.sweep()
        .catch((error: unknown) => this.logger.warn({ msg: 'expiring write proposals failed', error: (error as Error).message }))
        .finally(() => (this.running = undefined));
    }, this.config.chatHeartbeatIntervalMs);
    this.timer.unref();
  }

  /**
   * Before the ORM closes its pool (as the chat worker does): a sweep still acquiring a connection while the pool
   * ends would never release it, and the pool's end would wait for it for ever.
   */
  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One pass: up to 100 chats. */
  async sweep(): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      for (const chat of await this.chats.lockExpiredApprovals(em, 100)) {
        const now = Date.now();
        const expired = (chat.pendingToolCalls ?? []).filter(
          (call): call is PendingToolCall & { proposal: WriteProposal } =>
            call.proposal !== undefined && Date.parse(call.proposal.expiresAt) <= now,
        );
        if (!expired.length) continue;
        const spent = await ApprovalStatements.outcomes(em, chat.id);
        const results: SettledProposal[] = expired.map((call) => {
          const outcome = spent.get(call.id);
          return settled(call, outcome ?? expiredOutcome(call.proposal), null);
        });
        await this.chats.settleProposals(em, chat, results);
        await ApprovalStatements.audit(
          em,
          expired
            .filter((call) => !spent.has(call.id))
            .map((call) => decisionEntry(proposalRef(chat, call), undefined, 'approval.expire', 'ok')),
        );
      }
    });
  }
}
