import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { parsePrometheusText, Scrape } from './prometheus';

describe('the Prometheus text reader of the tests', () => {
  it("reads prom-client's output: labelled counters, gauges and histograms, escapes included", async () => {
    const registry = new Registry();
    const counter = new Counter({
      name: 'c_total',
      help: 'A "counter"\\ with\nlines',
      labelNames: ['path'],
      registers: [registry],
    });
    const gauge = new Gauge({ name: 'g', help: 'A gauge', registers: [registry] });
    const histogram = new Histogram({
      name: 'h_seconds',
      help: 'A histogram',
      labelNames: ['route'],
      buckets: [0.1, 1],
      registers: [registry],
    });
    counter.inc({ path: 'C:\\dir "x"\nnext' }, 3);
    gauge.set(-2.5);
    histogram.observe({ route: '/a' }, 0.05);
    histogram.observe({ route: '/a' }, 5);
    histogram.observe({ route: '/b' }, 0.5);

    const scrape = new Scrape(await registry.metrics());

    expect(scrape.family('c_total')).toMatchObject({ type: 'counter', help: 'A "counter"\\ with\nlines' });
    expect(scrape.samples('c_total')).toEqual([{ name: 'c_total', labels: { path: 'C:\\dir "x"\nnext' }, value: 3 }]);
    expect(scrape.value('g')).toBe(-2.5);
    expect(scrape.count('h_seconds', { route: '/a' })).toBe(2);
    expect(scrape.count('h_seconds', { route: '/b' })).toBe(1);
    expect(scrape.value('h_seconds_sum', { route: '/a' })).toBeCloseTo(5.05);
    expect(scrape.value('h_seconds_bucket', { route: '/a', le: '0.1' })).toBe(1);
    expect(scrape.value('h_seconds_bucket', { route: '/a', le: '+Inf' })).toBe(2);
  });

  it.each([
    ['a sample without its TYPE', 'x 1\n'],
    ['a malformed value', '# TYPE x gauge\nx one\n'],
    ['an unterminated label', '# TYPE x gauge\nx{a="b 1\n'],
    ['a bad escape', '# TYPE x gauge\nx{a="\\t"} 1\n'],
    ['a family typed twice', '# TYPE x gauge\n# TYPE x gauge\n'],
    ['a histogram without +Inf', '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n'],
    ['buckets that shrink', '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'],
  ])('refuses %s', (_label, text) => {
    expect(() => parsePrometheusText(text)).toThrow();
  });
});
