// The autograd explorer: the graph (Graphviz's SVG), a panel for the selected node, the backward
// pass replayed step by step in the engine's order, a search box, and the self-check (#selftest).
'use strict';

const data = JSON.parse(document.getElementById('data').textContent);
const nodes = data.nodes;
const panel = document.getElementById('panel');
const graph = document.getElementById('graph');
let selected = -1;
let played = 0;                 // steps of data.order run so far
const stepOf = new Map();       // node id -> its index in data.order

document.getElementById('title').textContent = data.title;
document.title = data.title;
data.order.forEach((s, k) => stepOf.set(s.node, k));
if (data.gradients_note) {
  const note = document.getElementById('note');
  note.textContent = data.gradients_note;
  note.hidden = false;
}

// The layout: Graphviz's SVG (its text escaped by Graphviz), each node a <g id="n<id>">.
graph.innerHTML = data.svg || '';
const svg = graph.querySelector('svg');
const natural = svg ? [svg.width.baseVal.value, svg.height.baseVal.value] : [0, 0];
function gOf(id) {
  return document.getElementById('n' + id);
}
for (const n of nodes) {
  const g = gOf(n.id);
  if (g) g.addEventListener('click', () => select(n.id));
}
document.getElementById('zoom').addEventListener('input', (e) => {
  if (!svg) return;
  const f = e.target.value / 100;
  svg.setAttribute('width', natural[0] * f);
  svg.setAttribute('height', natural[1] * f);
});

function nodeTitle(n) {
  return n.label ? `${n.label} (${n.name})` : n.name;
}

function link(id) {
  return el('span', { class: 'link', onclick: () => select(id) }, nodeTitle(nodes[id]));
}

// The panel of node `id`, as of the steps played so far.
function select(id) {
  selected = id;
  for (const g of graph.querySelectorAll('g.node.selected')) g.classList.remove('selected');
  const g = gOf(id);
  if (g) g.classList.add('selected');
  const n = nodes[id];
  const parts = [el('h2', {}, n.name)];
  if (n.label) parts.push(el('div', {}, 'tensor ', el('b', {}, n.label)));
  parts.push(el('div', { class: 'muted' }, `${n.kind === 'leaf' ? 'leaf' : 'output'} ${shapeText(n.shape)}` +
                                             (id === 0 ? ' — the explored tensor' : '')));
  parts.push(el('code', { class: 'formula' }, n.formula || '(no formula)'));

  parts.push(el('h3', {}, 'forward value'));
  parts.push(n.value ? tensorView(n.value) : el('div', { class: 'muted' }, n.value_note || 'not kept'));

  parts.push(el('h3', {}, 'gradient received'));
  const k = stepOf.get(id);
  if (k === undefined) {
    parts.push(el('div', { class: 'muted' }, data.gradients_note || 'no gradient reaches this node'));
  } else if (k >= played) {
    parts.push(el('div', { class: 'muted' }, `not yet: it runs at step ${k + 1} of ${data.order.length} (play backward)`));
  } else {
    const step = data.order[k];
    parts.push(el('div', { class: 'muted' }, `step ${k + 1} of ${data.order.length}`));
    parts.push(tensorView(step.grad));
    if (n.inputs.length) parts.push(el('h3', {}, 'gradients sent to its inputs'));
    n.inputs.forEach((inp, i) => {
      parts.push(el('div', {}, `input ${i} ${shapeText(inp.shape)}: `,
                    inp.node >= 0 ? link(inp.node) : el('span', { class: 'muted' }, 'needs no gradient')));
      if (inp.node >= 0) parts.push(tensorView(step.sent[i]));
    });
  }
  if (n.kind === 'leaf' && data.leaf_grads[id]) {
    parts.push(el('h3', {}, 'its gradient by autograd::grad'));
    parts.push(tensorView(data.leaf_grads[id]));
  }
  if (n.kind === 'op') {
    parts.push(el('h3', {}, 'inputs'));
    n.inputs.forEach((inp, i) => parts.push(el('div', {}, `${i}: ${shapeText(inp.shape)} `,
                                                      inp.node >= 0 ? link(inp.node) : '(constant)')));
    parts.push(el('h3', {}, 'saved tensors'));
    if (n.saved_note) parts.push(el('div', { class: 'muted' }, n.saved_note));
    else if (!n.saved.length) parts.push(el('div', { class: 'muted' }, 'none'));
    n.saved.forEach((t, i) => parts.push(el('div', {}, `saved ${i}`), tensorView(t)));
  }
  panel.replaceChildren(...parts);
}

// Scrolls the graph (not the page) so that node g is in view.
function reveal(g) {
  if (!g) return;
  const r = g.getBoundingClientRect(), c = graph.getBoundingClientRect();
  if (r.top < c.top || r.bottom > c.bottom) graph.scrollTop += r.top - c.top - c.height / 2;
  if (r.left < c.left || r.right > c.right) graph.scrollLeft += r.left - c.left - c.width / 2;
}

// ---- play backward ----
function paint() {
  for (const g of graph.querySelectorAll('g.node')) g.classList.remove('active', 'done');
  for (let k = 0; k < played; ++k) {
    const g = gOf(data.order[k].node);
    if (g) g.classList.add(k === played - 1 ? 'active' : 'done');
  }
  document.getElementById('progress').textContent = data.order.length ? `${played} / ${data.order.length}` : '';
  document.getElementById('step').disabled = played >= data.order.length;
  document.getElementById('play').disabled = played >= data.order.length;
}
function step() {
  if (played >= data.order.length) return;
  ++played;
  paint();
  select(data.order[played - 1].node);
  reveal(gOf(data.order[played - 1].node));
}
let timer = null;
function stop() {
  if (timer) clearInterval(timer);
  timer = null;
  document.getElementById('play').textContent = '\u25B6 play backward';
}
document.getElementById('step').addEventListener('click', () => { stop(); step(); });
document.getElementById('reset').addEventListener('click', () => { stop(); played = 0; paint(); select(selected < 0 ? 0 : selected); });
document.getElementById('play').addEventListener('click', () => {
  if (timer) return stop();
  document.getElementById('play').textContent = '\u23F8 pause';
  timer = setInterval(() => { step(); if (played >= data.order.length) stop(); }, 600);
});

// ---- search ----
const search = document.getElementById('search');
function matches(q) {
  q = q.trim().toLowerCase();
  return q ? nodes.filter((n) => n.name.toLowerCase().includes(q) || (n.label || '').toLowerCase().includes(q)) : [];
}
search.addEventListener('input', () => {
  for (const g of graph.querySelectorAll('g.node.match')) g.classList.remove('match');
  const found = matches(search.value);
  for (const n of found) {
    const g = gOf(n.id);
    if (g) g.classList.add('match');
  }
  document.getElementById('matches').textContent = search.value.trim() ? `${found.length} found` : '';
});
search.addEventListener('keydown', (e) => {
  if (e.key !== 'Enter') return;
  const found = matches(search.value);
  if (!found.length) return;
  const at = found.findIndex((n) => n.id === selected);
  const n = found[(at + 1) % found.length];
  select(n.id);
  reveal(gOf(n.id));
});

// ---- the self-check (#selftest), run by the browser tests ----
function sameTensor(a, b) {
  if (!a || !b) return a === b;
  return JSON.stringify(a.values || a.summary) === JSON.stringify(b.values || b.summary) &&
         JSON.stringify(a.shape) === JSON.stringify(b.shape);
}
function selftest() {
  const fails = [];
  for (const n of nodes) {
    select(n.id);
    const text = panel.textContent;
    if (!gOf(n.id)) fails.push(`node ${n.id} (${n.name}) is not drawn`);
    if (!text.includes(n.name)) fails.push(`panel of node ${n.id} lacks its name ${n.name}`);
    if (n.label && !text.includes(n.label)) fails.push(`panel of node ${n.id} lacks its label`);
    if (!n.formula || !text.includes(n.formula)) fails.push(`panel of node ${n.id} (${n.name}) lacks its formula`);
    if (n.value && !panel.querySelector('.tensor')) fails.push(`panel of node ${n.id} shows no value`);
    // Every heatmap of a value comes with its colour scale; nothing runs past the panel's edge.
    if (panel.querySelectorAll('canvas.heat').length !== panel.querySelectorAll('.lheat-scale').length) fails.push(`panel of node ${n.id}: a heatmap without its colour scale`);
    if (panel.scrollWidth > panel.clientWidth + 1) fails.push(`panel of node ${n.id} is wider than the panel (${panel.scrollWidth} > ${panel.clientWidth})`);
    if (!n.value && !text.includes(n.value_note || '?')) fails.push(`panel of node ${n.id} says nothing of its value`);
  }
  played = 0;
  const seen = new Map();
  while (played < data.order.length) {
    step();
    const s = data.order[played - 1];
    if (selected !== s.node || !gOf(s.node).classList.contains('active')) fails.push(`step ${played} not shown`);
    if (s.grad && !panel.textContent.includes(`step ${played} of`)) fails.push(`step ${played}: panel lacks the gradient`);
    seen.set(s.node, s.grad);
  }
  const leaves = Object.keys(data.leaf_grads);
  for (const id of leaves) {
    if (!sameTensor(seen.get(+id), data.leaf_grads[id])) fails.push(`leaf ${id} (${nodeTitle(nodes[id])}): replayed gradient differs from autograd::grad's`);
  }
  if (!data.gradients_note && !data.order.length) fails.push('no backward steps');
  if (document.querySelectorAll('#legend .swatch').length !== 6) fails.push('the legend of the node colours is missing');
  writeResult(fails.length ? 'FAIL ' + fails.slice(0, 8).join('; ')
                           : `PASS ${nodes.length} nodes, ${data.order.length} steps, ${leaves.length} leaf gradients`);
}

// Fit the graph to the window's width (between 0.6x and 1.6x; a tall graph scrolls).
if (svg) {
  const wide = (graph.clientWidth - 24) / natural[0], tall = (graph.clientHeight - 24) / natural[1];
  const fit = Math.max(0.6, Math.min(1.6, wide, Math.max(tall, 0.75)));
  const zoom = document.getElementById('zoom');
  zoom.value = Math.round(fit * 100);
  zoom.dispatchEvent(new Event('input'));
}
paint();
select(0);
// #step=N opens the page N steps into the backward pass; #selftest runs the self-check.
const at = /^#step=(\d+)$/.exec(location.hash);
if (at) for (let k = 0; k < +at[1]; ++k) step();
if (selftestRequested()) selftest();
