import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import nodemailer, { type Transporter } from 'nodemailer';
import { APP_CONFIG, type AppConfig } from '../config/app-config';

/** A plain-text email. */
export interface Email {
  to: string;
  subject: string;
  text: string;
}

/** Sends schedule emails over SMTP_URL from SMTP_FROM (nodemailer); `configured` is false without SMTP_URL. */
@Injectable()
export class ScheduleMailer implements OnApplicationShutdown {
  private transport?: Transporter;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  get configured(): boolean {
    return this.config.smtpUrl !== undefined;
  }

  /** Sends one email; throws what the SMTP server or the connection answered. */
  async send(email: Email): Promise<void> {
    this.transport ??= nodemailer.createTransport(
      { url: this.config.smtpUrl, connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000 },
      { from: this.config.smtpFrom },
    );
    await this.transport.sendMail({ to: email.to, subject: email.subject, text: email.text });
  }

  onApplicationShutdown(): void {
    this.transport?.close();
  }
}
