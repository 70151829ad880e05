// The training report: loss curves, the gradient flow through the blocks, the attention maps of every layer and head at each recorded
// step (a slider moves through them), the samples, the settings; #selftest checks the page.
'use strict';

const data = JSON.parse(document.getElementById('data').textContent);
document.getElementById('title').textContent = data.title;
document.getElementById('subtitle').textContent = data.subtitle || '';
document.title = data.title;

// ---- line charts: log-scale y, labelled axes, a legend in each series' colour ----
// Legend text is coloured with an inline style: page.css's `.chart text { fill: var(--muted) }`
// would win over a fill attribute.
const W = 900, H = 300, M = { l: 66, r: 30, t: 10, b: 36 };
function lineChart(series, yTitle) {
  const svg = svgEl('svg', { width: W, height: H, class: 'chart' });
  series = series.filter((s) => s.x.length);
  const xs = series.flatMap((s) => s.x), ys = series.flatMap((s) => s.y).filter((v) => v > 0);
  const x0 = Math.min(...xs, 0), x1 = Math.max(...xs, 1);
  const ly0 = Math.log10(Math.min(...ys)), ly1 = Math.log10(Math.max(...ys)) + 1e-9;
  const px = (x) => M.l + ((x - x0) / (x1 - x0 || 1)) * (W - M.l - M.r);
  const py = (y) => H - M.b - ((Math.log10(Math.max(y, 1e-12)) - ly0) / (ly1 - ly0 || 1)) * (H - M.t - M.b);
  svg.append(svgEl('rect', { x: M.l, y: M.t, width: W - M.l - M.r, height: H - M.t - M.b, fill: 'none', stroke: '#d5dbe4' }));
  for (let e = Math.floor(ly0); e <= Math.ceil(ly1); ++e) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (Math.log10(v) < ly0 || Math.log10(v) > ly1) continue;
      svg.append(svgEl('line', { x1: M.l, x2: W - M.r, y1: py(v), y2: py(v), stroke: '#eef1f5' }));
      const t = svgEl('text', { x: M.l - 6, y: py(v) + 4, 'text-anchor': 'end' });
      t.textContent = fmt(v);
      svg.append(t);
    }
  }
  for (let k = 0; k <= 5; ++k) {
    const x = x0 + ((x1 - x0) * k) / 5;
    const t = svgEl('text', { x: px(x), y: H - M.b + 16, 'text-anchor': 'middle' });
    t.textContent = Math.round(x);
    svg.append(t);
  }
  const xl = svgEl('text', { x: (W + M.l) / 2, y: H - 4, 'text-anchor': 'middle' });
  xl.textContent = 'step';
  svg.append(xl);
  const yl = svgEl('text', { x: 14, y: (H - M.b + M.t) / 2, 'text-anchor': 'middle',
                             transform: `rotate(-90 14 ${(H - M.b + M.t) / 2})` });
  yl.textContent = yTitle;
  svg.append(yl);
  series.forEach((s, i) => {
    const d = s.x.map((x, k) => `${k ? 'L' : 'M'}${px(x).toFixed(1)},${py(s.y[k]).toFixed(1)}`).join('');
    svg.append(svgEl('path', { d, fill: 'none', stroke: s.color, 'stroke-width': s.width, class: 'curve' }));
    const t = svgEl('text', { x: W - M.r - 8, y: M.t + 16 + 16 * i, 'text-anchor': 'end',
                              class: 'legend', style: `fill: ${s.color}` });
    t.textContent = `${s.name} (last ${fmt(s.y[s.y.length - 1])})`;
    svg.append(t);
  });
  return { svg, px, curves: series.length };
}

// ---- loss curves: train and held-out, a marker at the slider's step ----
const loss = lineChart([
  { name: 'train', x: data.loss.train_steps, y: data.loss.train_loss, color: '#8aa4c8', width: 1 },
  { name: 'held-out', x: data.loss.val_steps, y: data.loss.val_loss, color: '#c0392b', width: 2.5 },
], 'cross-entropy loss (log scale)');
const chart = loss.svg, px = loss.px;
const marker = svgEl('line', { y1: M.t, y2: H - M.b, stroke: '#1d2530', 'stroke-dasharray': '4 3' });
chart.append(marker);
document.getElementById('loss').append(chart);

// ---- gradient flow: one curve per block, from the blocks' full backward hooks ----
const flow = data.gradient_flow || { blocks: [], steps: [] };
const blockColors = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf'];
const flowSeries = (values) => flow.blocks.map((name, b) => (
  { name, x: flow.steps, y: values[b], color: blockColors[b % blockColors.length], width: 1.5 }));
const flowCharts = [];
if (!flow.blocks.length) document.getElementById('flow-section').hidden = true;
else {
  flowCharts.push(lineChart(flowSeries(flow.output_grad), '||dL/d block output|| (log scale)'));
  flowCharts.push(lineChart(flowSeries(flow.grad_share), '||grad θ|| / ||θ|| of the block (log scale)'));
  document.getElementById('flow-output').append(flowCharts[0].svg);
  document.getElementById('flow-share').append(flowCharts[1].svg);
}

// ---- attention maps with a step slider ----
const snaps = data.attention;
const slider = document.getElementById('slider');
const maps = document.getElementById('maps');
if (!snaps.length) document.getElementById('attention-section').hidden = true;
if (data.example) document.getElementById('example').textContent = data.example;
slider.max = Math.max(0, snaps.length - 1);
function showStep(k) {
  const snap = snaps[k];
  if (!snap) return;
  document.getElementById('step-label').textContent = `step ${snap.step}  (${k + 1} of ${snaps.length})`;
  maps.dataset.step = snap.step;
  maps.replaceChildren(...snap.panels.map((p) => {
    const c = labelledHeatmap(p.values, p.rows, p.cols,
                              { max: 1, cell: Math.max(6, Math.floor(160 / p.cols)),
                                rowLabels: data.labels, colLabels: data.labels,
                                rowTitle: 'query token', colTitle: 'key token',
                                scaleTitle: 'attention weight' });
    return el('figure', {}, el('figcaption', {}, p.title), c);
  }));
  marker.setAttribute('x1', px(snap.step));
  marker.setAttribute('x2', px(snap.step));
}
slider.addEventListener('input', () => showStep(+slider.value));
slider.value = slider.max;
showStep(+slider.value);

// ---- samples and settings ----
document.getElementById('samples').replaceChildren(
  ...data.samples.map((s) => el('div', {}, el('div', { class: 'muted' }, `step ${s.step}`), el('pre', {}, s.text))));
if (!data.samples.length) document.getElementById('samples').textContent = 'none recorded';
document.getElementById('settings').replaceChildren(
  ...data.settings.map(([k, v]) => el('tr', {}, el('td', {}, k), el('td', {}, v))));

// ---- the self-check (#selftest), run by the browser tests ----
function selftest() {
  const fails = [];
  if (chart.querySelectorAll('path.curve').length !== loss.curves) fails.push('loss curves not drawn');
  // Each legend entry in its curve's colour, not page.css's grey.
  for (const svg of [chart, ...flowCharts.map((c) => c.svg)]) {
    const curves = [...svg.querySelectorAll('path.curve')].map((p) => getComputedStyle(p).stroke);
    const legends = [...svg.querySelectorAll('text.legend')].map((t) => getComputedStyle(t).fill);
    if (legends.join() !== curves.join()) fails.push(`legend colours ${legends} != curves ${curves}`);
  }
  for (const c of flowCharts) {
    if (c.svg.querySelectorAll('path.curve').length !== flow.blocks.length) fails.push('gradient-flow curves missing');
  }
  for (let k = 0; k < snaps.length; ++k) {
    slider.value = k;
    slider.dispatchEvent(new Event('input'));
    if (maps.dataset.step !== String(snaps[k].step)) fails.push(`slider at ${k} shows step ${maps.dataset.step}`);
    if (maps.querySelectorAll('canvas').length !== snaps[k].panels.length) fails.push(`step ${snaps[k].step}: maps missing`);
    if (!document.getElementById('step-label').textContent.includes(`step ${snaps[k].step}`)) fails.push('step label');
  }
  if (document.querySelectorAll('#samples pre').length !== data.samples.length) fails.push('samples missing');
  if (document.querySelectorAll('#settings tr').length !== data.settings.length) fails.push('settings missing');
  const panels = snaps.length ? snaps[0].panels.length : 0;
  writeResult(fails.length ? 'FAIL ' + fails.slice(0, 8).join('; ')
                           : `PASS ${snaps.length} steps, ${panels} maps, ${data.samples.length} samples, ` +
                             `gradient flow of ${flow.blocks.length} blocks over ${flow.steps.length} steps`);
}
if (selftestRequested()) selftest();
