import { EntityManager } from '@mikro-orm/postgresql';
import { Injectable, OnModuleInit } from '@nestjs/common';
import { PrometheusService } from '../../observability/prometheus.service';
import { ChatRepository } from './chat.repository';

/** A scrape waits at most this long for the chat counts; past it the gauge is left out of that scrape. */
const COUNT_TIMEOUT_MS = 1_000;

/** Gives the metrics the number of durable chats in each status, read from the database on every scrape. */
@Injectable()
export class ChatStatusGauge implements OnModuleInit {
  constructor(
    private readonly em: EntityManager,
    private readonly repo: ChatRepository,
    private readonly metrics: PrometheusService,
  ) {}

  onModuleInit(): void {
    this.metrics.collectChatStatuses(() => this.repo.countByStatus(this.em.fork(), COUNT_TIMEOUT_MS));
  }
}
