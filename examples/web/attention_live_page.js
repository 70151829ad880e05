// attention_live.html's script: keeps the settings (inputs, weights, heads, dropout), asks Ember
// (attention_live.cpp compiled to WebAssembly) for the state after each edit, and draws it.
'use strict';

const page = {
  settings: {},      // what is sent to Ember: {inputs, heads, dropout, weights}
  state: null,       // Ember's answer
  selected: null,    // {path: ['inputs', i, j] or ['weights', name, i, j]} the slider moves
};

// Emscripten's module object: attention_live.js (loaded after this file) fills it in.
var Module = {
  print: (text) => console.log(text),
  printErr: (text) => console.error(text),
  onAbort: (what) => web.status(`Ember stopped: ${what}`, true),
  onRuntimeInitialized: () => {
    let settings;
    try {
      settings = web.fragmentSettings();
    } catch (e) {
      settings = null;
      web.status(`${e.message}: nothing computed (the button goes back to the chapter's numbers)`, true);
    }
    if (settings !== null) start(settings);
    document.getElementById('status').dataset.ready = 'true';
  },
};

// A fresh start from these settings (the chapter's for {}); the settings Ember refuses are said
// in the status line, and nothing else is shown then.
function start(settings) {
  const started = performance.now();
  page.settings = settings;
  page.state = null;
  page.selected = null;
  for (const id of ['inputs', 'weights', 'attention', 'context', 'grads', 'graph']) {
    document.getElementById(id).replaceChildren();
  }
  document.getElementById('loss').textContent = '';
  document.getElementById('state').textContent = '';
  document.getElementById('slider').disabled = true;
  document.getElementById('selected-name').textContent = 'click a number';
  if (!recompute()) return;
  // The chapter's weights (and inputs) come from Ember's first answer.
  page.settings.inputs = page.state.inputs;
  page.settings.weights = page.state.weights;
  document.getElementById('heads').value = String(page.state.heads);
  document.getElementById('dropout').checked = page.state.dropout;
  drawEditors();
  if (typeof page.state.loss === 'number') {
    web.status(`ready: forward + backward in ${(performance.now() - started).toFixed(1)} ms`);
  }
}

// Ember's state for page.settings, drawn; false (and the reason in the status line, the last
// state still shown) when Ember refuses them.
function recompute() {
  let text;
  try {
    text = web.callWithText('ember_attention_live_state', JSON.stringify(page.settings));
  } catch (e) {  // JSON.stringify of a hostile fragment (nested too deep) or a trap
    web.status(`Ember: ${e.message}`, true);
    return false;
  }
  const state = JSON.parse(text);
  if (state.error) {
    web.status(`Ember: ${state.error}${page.state ? ' (the numbers below are the last ones computed)' : ''}`, true);
    return false;
  }
  page.state = state;
  document.getElementById('state').textContent = text;
  drawResults();
  web.status(typeof state.loss === 'number' ? 'ready'
             : `the loss is ${state.loss}: a number overflowed float32 (the inputs or weights are too large)`,
             typeof state.loss !== 'number');
  return true;
}

// A number input bound to one entry of page.settings (path: keys down to the number).
function numberInput(path) {
  const holder = path.slice(0, -1).reduce((object, key) => object[key], page.settings);
  const last = path[path.length - 1];
  // Shown to 6 digits (0.43, not the float's 0.4300000071525574); sent exactly until edited.
  const input = web.element('input', { type: 'number', step: '0.01', value: String(Number(holder[last].toPrecision(6))) });
  input.addEventListener('input', () => {
    if (input.value.trim() === '' || !Number.isFinite(Number(input.value))) {
      web.status(`${path.join(' ')}: not a number: still ${holder[last]}`, true);
      return;
    }
    holder[last] = Number(input.value);
    recompute();
  });
  input.addEventListener('focus', () => select(path, input));
  return input;
}

// The slider moves the selected number.
function select(path, input) {
  page.selected = { path, input };
  document.getElementById('selected-name').textContent = path.join(' ');
  const slider = document.getElementById('slider');
  slider.disabled = false;
  slider.value = input.value;
}

function drawEditors() {
  const s = page.state;
  const inputs = document.getElementById('inputs');
  inputs.replaceChildren(web.table(page.settings.inputs, {
    rowNames: s.tokens, columnNames: ['x₁', 'x₂', 'x₃'],
    cell: (x, i, j) => numberInput(['inputs', i, j]),
  }));
  const weights = document.getElementById('weights');
  weights.replaceChildren();
  for (const name of Object.keys(page.settings.weights)) {
    const w = page.settings.weights[name];
    weights.append(web.element('h3', {}, name), web.table(w, {
      cell: Array.isArray(w[0]) ? (x, i, j) => numberInput(['weights', name, i, j])
                                : (x, i, j) => numberInput(['weights', name, j]),
    }));
  }
}

function drawResults() {
  const s = page.state;
  const attention = document.getElementById('attention');
  attention.replaceChildren();
  s.attn_weights.forEach((head, h) => {
    attention.append(web.element('div', { class: 'map' }, web.element('h3', {}, `head ${h + 1}`),
                                 web.table(head, { rowNames: s.tokens, columnNames: s.tokens, scale: 1 })));
  });
  document.getElementById('context').replaceChildren(web.table(s.context, { rowNames: s.tokens }));
  document.getElementById('loss').textContent = web.format(s.loss);
  const grads = document.getElementById('grads');
  grads.replaceChildren();
  for (const [name, grad] of Object.entries(s.grads)) {
    grads.append(web.element('div', { class: 'grad' }, web.element('h3', {}, `∂loss/∂${name}`),
                             web.table(grad, { rowNames: name === 'inputs' ? s.tokens : [] })));
  }
  drawGraph(s.graph);
}

// The graph as a table, one row per node in backward order (autograd::explore_data's `order`).
function drawGraph(graph) {
  const byId = new Map(graph.nodes.map((node) => [node.id, node]));
  const table = web.element('table', { class: 'graph' });
  table.append(web.element('tr', {}, ...['node', 'formula', 'shape', 'value', 'gradient'].map((h) => web.element('th', {}, h))));
  const text = (t) => (t && (t.text ?? (t.values ? JSON.stringify(t.values) : ''))) || '';
  for (const step of graph.order) {
    const node = byId.get(step.node);
    table.append(web.element('tr', {},
      web.element('td', {}, node.label || node.name),
      web.element('td', {}, node.formula || ''),
      web.element('td', {}, JSON.stringify(node.shape ?? '')),
      web.element('td', { class: 'tensor' }, text(node.value)),
      web.element('td', { class: 'tensor' }, text(step.grad))));
  }
  document.getElementById('graph').replaceChildren(table);
}

// (With no state yet, the settings refused at load, a change starts afresh from them: the editors
// are drawn from Ember's first answer.)
document.getElementById('heads').addEventListener('change', (event) => {
  page.settings.heads = Number(event.target.value);
  if (page.state) recompute();
  else start(page.settings ?? {});
});
document.getElementById('dropout').addEventListener('change', (event) => {
  page.settings.dropout = event.target.checked;
  if (page.state) recompute();
  else start(page.settings ?? {});
});
document.getElementById('reset').addEventListener('click', () => start({}));
document.getElementById('slider').addEventListener('input', (event) => {
  if (!page.selected) return;
  page.selected.input.value = event.target.value;
  page.selected.input.dispatchEvent(new Event('input'));
});
