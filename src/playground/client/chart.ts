import embed, { type VisualizationSpec } from 'vega-embed';
import { expressionInterpreter } from 'vega-interpreter';

/**
 * Draws a Vega-Lite spec (its data inline) into the element, under the page's strict policy:
 * Vega compiles its expressions with `new Function` unless told to interpret them, and vega-embed
 * and its tooltips would add inline <style> elements, so those are off (the stylesheet styles the chart).
 */
export async function drawChart(target: HTMLElement, spec: unknown): Promise<void> {
  await embed(target, spec as VisualizationSpec, {
    ast: true,
    expr: expressionInterpreter,
    actions: false,
    renderer: 'svg',
    defaultStyle: false,
    tooltip: false,
  });
}
