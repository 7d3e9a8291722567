import type { VegaLiteSpec } from './chart-spec';

/**
 * Renders a chart's Vega-Lite spec to SVG on the server: compiled to Vega and run headless (renderer
 * `none`, no canvas, no browser). The spec's data are inline; the loader fetches nothing, so a spec
 * can never make the server read a URL or a file.
 */
export async function renderChartSvg(spec: VegaLiteSpec): Promise<string> {
  // ESM-only packages: TypeScript keeps these real import()s in CommonJS output under nodenext. One after
  // the other: they share dependencies, which Jest's ESM loader cannot link for two imports at once.
  const vega = await import('vega');
  const vegaLite = await import('vega-lite');
  const compiled = vegaLite.compile(spec as unknown as Parameters<typeof vegaLite.compile>[0]).spec;
  const loader = vega.loader();
  const refuse = () => Promise.reject(new Error('A chart loads no external data'));
  Object.assign(loader, { load: refuse, sanitize: refuse, http: refuse, file: refuse });
  const view = new vega.View(vega.parse(compiled), { renderer: 'none', loader });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
