// Shared by the autograd explorer (graph.js) and the training report (report.js): building DOM
// nodes (always with textContent: names and values are never parsed as HTML), number formatting,
// heatmaps and summaries of tensors, and the self-check's result line.
'use strict';

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svgEl(tag, attrs) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// A JSON number, or "nan"/"inf"/"-inf" (explore.cpp writes non-finite values as strings).
function num(v) {
  if (typeof v === 'number') return v;
  if (v === 'inf') return Infinity;
  if (v === '-inf') return -Infinity;
  return NaN;
}

function fmt(v) {
  const x = num(v);
  if (!Number.isFinite(x)) return String(x);
  if (x === 0) return '0';
  const a = Math.abs(x);
  return a >= 1e4 || a < 1e-3 ? x.toExponential(3) : String(+x.toPrecision(4));
}

function shapeText(shape) {
  return '(' + shape.join(', ') + (shape.length === 1 ? ',' : '') + ')';
}

// Red for positive, blue for negative, white at 0; scaled by the largest magnitude `m`.
function heatColor(v, m) {
  const x = num(v);
  if (!Number.isFinite(x)) return '#000';
  const t = m > 0 ? Math.min(1, Math.abs(x) / m) : 0;
  const c = Math.round(255 * (1 - t));
  return x >= 0 ? `rgb(255,${c},${c})` : `rgb(${c},${c},255)`;
}

// A heatmap of rows x cols values (row-major) on a canvas; the title shows the value under the
// mouse. Options: cell (px), max (the colour scale's top; default the largest magnitude),
// rowLabels/colLabels (for the tooltip).
function heatmap(values, rows, cols, opts) {
  const o = opts || {};
  const cell = o.cell || Math.max(4, Math.min(22, Math.floor(380 / Math.max(rows, cols))));
  const canvas = el('canvas', { width: cols * cell, height: rows * cell, class: 'heat' });
  let m = o.max || 0;
  if (!o.max) for (const v of values) if (Number.isFinite(num(v))) m = Math.max(m, Math.abs(num(v)));
  const ctx = canvas.getContext('2d');
  for (let r = 0; r < rows; ++r) {
    for (let c = 0; c < cols; ++c) {
      ctx.fillStyle = heatColor(values[r * cols + c], m);
      ctx.fillRect(c * cell, r * cell, cell, cell);
    }
  }
  canvas.addEventListener('mousemove', (ev) => {
    const c = Math.floor(ev.offsetX / cell), r = Math.floor(ev.offsetY / cell);
    if (r >= rows || c >= cols) return;
    const at = o.rowLabels ? `${o.rowLabels[r]} -> ${o.colLabels[c]}` : `[${r}, ${c}]`;
    canvas.title = `${at} = ${fmt(values[r * cols + c])}`;
  });
  return canvas;
}

// The colour scale of a heatmap of `values` (with `max`, else the largest magnitude): a bar from 0
// (or -max when a value is negative) to max, with its ends' values and a title.
function colourScale(values, max, title) {
  let m = max || 0;
  if (!max) for (const v of values) if (Number.isFinite(num(v))) m = Math.max(m, Math.abs(num(v)));
  const signed = values.some((v) => num(v) < 0);
  const stops = [];
  for (let i = 0; i <= 10; ++i) stops.push(heatColor((signed ? -m : 0) + (i / 10) * (signed ? 2 * m : m), m));
  return el('div', { class: 'lheat-scale' },
            el('span', {}, fmt(signed ? -m : 0)),
            el('span', { class: 'lheat-bar', style: `background: linear-gradient(to right, ${stops.join(', ')})` }),
            el('span', {}, fmt(m)),
            el('span', { class: 'muted' }, title || ''));
}

// A heatmap with its axes labelled: the row and column labels (tokens) as ticks (every k-th when
// the cells are too small for all), the axes' names, and a colour scale from 0 (or -max) to max.
// Options: those of heatmap, plus rowTitle, colTitle and scaleTitle.
function labelledHeatmap(values, rows, cols, opts) {
  const o = opts || {};
  const canvas = heatmap(values, rows, cols, o);
  const cell = canvas.width / cols;
  const every = Math.max(1, Math.ceil(10 / cell));  // ticks at least 10 px apart
  const box = el('div', { class: 'lheat' });
  const ticks = (labels, n, cls) => {
    const t = el('div', { class: cls });
    for (let i = 0; i < n; ++i) {
      const raw = labels ? String(labels[i]) : String(i);
      const label = raw === ' ' ? '\u2423' : raw === '\n' ? '\u21b5' : raw;  // visible blanks
      t.append(el('span', { style: `${cls === 'lheat-cols' ? 'width' : 'height'}: ${cell}px` },
                  i % every === 0 ? label : ''));
    }
    return t;
  };
  box.append(el('div', { class: 'lheat-coltitle' }, o.colTitle || ''));
  box.append(el('div', { class: 'lheat-rowtitle' }, o.rowTitle || ''));
  box.append(ticks(o.rowLabels, rows, 'lheat-rows'));
  box.append(canvas);
  box.append(ticks(o.colLabels, cols, 'lheat-cols'));
  box.append(colourScale(values, o.max, o.scaleTitle));
  return box;
}

// A tensor of explore's JSON: its shape, PyTorch's text, and a heatmap of 1-d/2-d data or of
// one slice of the last two dims (a selector picks the slice: a batch element, a head); a large
// tensor as its summary.
function tensorView(t) {
  if (!t) return el('div', { class: 'muted' }, 'none');
  const box = el('div', { class: 'tensor' });
  box.append(el('div', { class: 'muted' }, `shape ${shapeText(t.shape)}  ${t.dtype}  ${t.numel} elements`));
  if (t.summary) {
    const s = t.summary;
    box.append(el('div', {}, `min ${fmt(s.min)}  max ${fmt(s.max)}  mean ${fmt(s.mean)}` +
                                 (s.nonfinite ? `  non-finite ${s.nonfinite}` : '')));
    box.append(histogram(s.hist));
    box.append(el('pre', {}, 'first values: ' + s.first.map(fmt).join(', ') + ', ...'));
    return box;
  }
  const v = t.values;
  if (!v || v.length < 2) {
    if (t.text) box.append(el('pre', {}, t.text));
    return box;
  }
  const shape = t.shape;
  const cols = shape[shape.length - 1];
  const rows = shape.length >= 2 ? shape[shape.length - 2] : 1;
  const slices = v.length / (rows * cols);
  const holder = el('div');
  const show = (k) => {
    const slice = v.slice(k * rows * cols, (k + 1) * rows * cols);
    holder.replaceChildren(el('div', { class: 'scroll' }, heatmap(slice, rows, cols)),
                           colourScale(slice, 0, 'value'));
  };
  if (slices > 1) {
    const lead = shape.slice(0, -2);
    const select = el('select', { onchange: (e) => show(+e.target.value) });
    for (let k = 0; k < slices; ++k) {
      const idx = [];
      let r = k;
      for (let d = lead.length - 1; d >= 0; --d) {
        idx.unshift(r % lead[d]);
        r = Math.floor(r / lead[d]);
      }
      select.append(el('option', { value: k }, `[${idx.join(', ')}, :, :]`));
    }
    box.append(el('div', { class: 'muted' }, 'slice ', select));
  }
  box.append(holder);
  show(0);
  if (t.text) box.append(el('pre', {}, t.text));  // PyTorch's text format, under the heatmap
  return box;
}

function histogram(bins) {
  const w = 240, h = 50, m = Math.max(1, ...bins);
  const svg = svgEl('svg', { width: w, height: h, class: 'hist' });
  bins.forEach((b, i) => {
    const bh = (b / m) * (h - 2);
    svg.append(svgEl('rect', { x: (i * w) / bins.length, y: h - bh, width: w / bins.length - 1, height: bh }));
  });
  return svg;
}

// The self-check's verdict, written where the browser test reads it (Chromium's DOM dump).
function writeResult(text) {
  const pre = document.getElementById('selftest');
  if (pre.textContent.startsWith('FAIL')) return;  // the first failure stays
  pre.textContent = text;
  pre.hidden = false;
}

function selftestRequested() {
  return location.hash === '#selftest';
}

window.addEventListener('error', (e) => writeResult(`FAIL JavaScript error: ${e.message} (line ${e.lineno})`));
