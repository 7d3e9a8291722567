import { Logger } from '@nestjs/common';
import { DomainError } from '../common/domain-error';
import { PrometheusService, RecentRate } from './prometheus.service';

describe('PrometheusService', () => {
  it('keeps each app in a registry of its own', async () => {
    const a = new PrometheusService();
    const b = new PrometheusService();
    a.observeToolCall('echo', 'ok', 0.01);
    expect(await a.scrape(undefined)).toContain('datacopilot_tool_calls_total{tool="echo",outcome="ok"} 1');
    expect(await b.scrape(undefined)).not.toContain('tool="echo"');
  });

  it('labels an outcome outside the error catalog as error, and cuts long labels', async () => {
    const metrics = new PrometheusService();
    metrics.observeToolCall('echo', 'something_a_tool_made_up', 0.01);
    metrics.observeModelCall({ agent: 'a'.repeat(300), model: 'm', outcome: 'llm_timeout', seconds: 1 });
    const text = await metrics.scrape(undefined);
    expect(text).toContain('datacopilot_tool_calls_total{tool="echo",outcome="error"} 1');
    expect(text).toContain(`datacopilot_llm_calls_total{agent="${'a'.repeat(100)}",model="m",outcome="llm_timeout"} 1`);
  });

  it('answers only Bearer <METRICS_TOKEN> when a token is set', async () => {
    const metrics = new PrometheusService('the-token');
    for (const header of [undefined, 'Bearer the-toke', 'Bearer the-token-and-more', 'the-token', 'Basic the-token']) {
      await expect(metrics.scrape(header)).rejects.toEqual(expect.any(DomainError));
    }
    await expect(metrics.scrape('Bearer the-token')).resolves.toContain('process_cpu_user_seconds_total');
    await expect(metrics.scrape('bearer the-token')).resolves.toContain('datacopilot_');
  });

  it('scrapes without the chats gauge when its source fails', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const metrics = new PrometheusService();
    metrics.collectChatStatuses(() => Promise.reject(new Error('database gone')));
    const text = await metrics.scrape(undefined);
    expect(warn).toHaveBeenCalledWith({ msg: 'could not read chats by status', error: 'database gone' });
    warn.mockRestore();
    expect(text).toContain('# TYPE datacopilot_chats gauge');
    expect(text).not.toMatch(/^datacopilot_chats\{/m);
  });
});

describe('RecentRate', () => {
  it('counts events of the last half second, per second, and forgets older ones', () => {
    let now = 10_000;
    const rate = new RecentRate(() => now);
    expect(rate.perSecond()).toBe(0);
    for (let i = 0; i < 30; i++) rate.count();
    expect(rate.perSecond()).toBe(60);
    now += 250;
    for (let i = 0; i < 10; i++) rate.count();
    expect(rate.perSecond()).toBe(80);
    // The first 30 fall out of the window; then everything does, however long the gap.
    now += 300;
    expect(rate.perSecond()).toBe(20);
    now += 60_000;
    expect(rate.perSecond()).toBe(0);
    rate.count();
    expect(rate.perSecond()).toBe(2);
  });
});
