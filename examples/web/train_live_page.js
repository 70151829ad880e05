// train_live.html's script: drives the training (train_live.cpp compiled to WebAssembly) a few
// steps per animation frame, and draws the loss curve, the held-out numbers and the attention maps.
'use strict';

const train = {
  settings: {},
  hidden: {},        // the fragment's settings that have no field on the page (digits, batch, seed)
  model: false,      // whether Ember holds a model (its last reset was accepted)
  losses: [],
  evaluation: null,
  running: false,
  stepsPerFrame: 1,
  started: 0,
};

var Module = {
  print: (text) => console.log(text),
  printErr: (text) => console.error(text),
  onAbort: (what) => web.status(`Ember stopped: ${what}`, true),
  onRuntimeInitialized: () => {
    const status = document.getElementById('status');
    let settings;
    try {
      settings = web.fragmentSettings();
    } catch (e) {
      web.status(`${e.message}: no model (the button makes one with the settings above)`, true);
      status.dataset.ready = 'true';
      return;
    }
    // Every setting goes to Ember as the fragment gives it (Ember refuses what is wrong, by name);
    // "run" is the page's own: N training steps at once, then an evaluation.
    const { run, ...toEmber } = settings;
    train.hidden = {};
    for (const [key, value] of Object.entries(toEmber)) {
      if (!FIELDS.includes(key)) {
        train.hidden[key] = value;
        continue;
      }
      const field = document.getElementById(key);
      if (field.tagName === 'SELECT' && ![...field.options].some((o) => o.value === String(value))) {
        field.append(web.element('option', {}, String(value)));  // shown as it is used
      }
      field.value = String(value);
    }
    // The fields' values (the fragment's where it gave them), and the fragment's values as it
    // gave them (a value a field cannot hold goes to Ember as it is, to be refused by name).
    if (!reset({ ...currentSettings(), ...toEmber })) {
      status.dataset.ready = 'true';
      return;
    }
    // (At most MAX_RUN: the page waits for them, unresponsive, and a link could ask for hours.)
    if (run !== undefined && !(Number.isInteger(run) && run >= 0 && run <= MAX_RUN)) {
      web.status(`the URL's #settings= "run" must be an integer in [0, ${MAX_RUN}], got ${String(JSON.stringify(run)).slice(0, 40)}: not trained`, true);
      status.dataset.ready = 'true';
      writeState();
      return;
    }
    if (run) {
      const started = performance.now();
      const done = trainSteps(run);  // (fewer than run past the schedule's end)
      const seconds = (performance.now() - started) / 1000;
      // (Under a headless browser's virtual time the clock stands still: no speed then.)
      if (seconds > 0 && done > 0) {
        document.getElementById('speed').textContent = `${(done / seconds).toFixed(1)} steps/s`;
        train.stepsPerSecond = done / seconds;
      }
      evaluate();
    }
    draw();
    if (!status.dataset.error) {
      web.status(`ready (${performance.now().toFixed(0)} ms after the page began to load)`);
    }
    status.dataset.ready = 'true';
    writeState();
  },
};

// The most training steps a fragment's "run" asks for at load.
const MAX_RUN = 2000;

// The settings that have a field on the page.
const FIELDS = ['lr', 'emb_dim', 'n_heads', 'n_layers', 'steps'];

// Calls one of train_live.cpp's functions; its JSON answer, or null after showing its error.
function call(name, types = [], args = []) {
  if (name !== 'reset' && !train.model) {
    web.status('no model: Ember refused the settings (above); change them and make a new model', true);
    train.running = false;
    pause();
    return null;
  }
  const answer = JSON.parse(types[0] === 'string' ? web.callWithText(`ember_train_live_${name}`, args[0])
                                                 : Module.ccall(`ember_train_live_${name}`, 'string', types, args));
  if (answer.error) {
    web.status(`Ember: ${answer.error}`, true);
    train.running = false;  // (no evaluation at this pause: it would hide the message)
    pause();
    return null;
  }
  return answer;
}

// The fields' settings (a field that does not hold a number goes as its text, which Ember
// refuses by name, rather than as 0), with the fragment's hidden ones.
function currentSettings() {
  const settings = { ...train.hidden };
  for (const key of FIELDS) {
    const text = document.getElementById(key).value;
    settings[key] = text.trim() !== '' && Number.isFinite(Number(text)) ? Number(text) : text;
  }
  return settings;
}

// A new model for these settings (the fields' by default): true if Ember took them. Refused,
// the page shows no model: the curve, numbers and maps of the last one are cleared.
function reset(settings = currentSettings()) {
  pause();
  train.settings = settings;
  train.losses = [];
  train.evaluation = null;
  train.stepsPerSecond = undefined;
  document.getElementById('try-output').textContent = '';
  document.getElementById('speed').textContent = '';
  for (const id of ['eval-loss', 'eval-token', 'eval-seq']) document.getElementById(id).textContent = '–';
  document.getElementById('eval-step').textContent = '';
  let text;
  try {
    text = JSON.stringify(settings);
  } catch (e) {  // a fragment nested too deep for JSON.stringify
    text = null;
    web.status(`the settings cannot be sent to Ember: ${e.message}`, true);
  }
  train.model = text !== null && call('reset', ['string'], [text]) !== null;
  if (train.model) web.status('ready: a new model');
  draw();
  writeState();
  return train.model;
}

function trainSteps(count) {
  const answer = call('train', ['number'], [count]);
  if (answer === null) return 0;
  train.losses.push(...answer.losses);
  if (answer.losses.length < count) pause();  // the schedule's last step
  return answer.losses.length;
}

// Greedy generation on the first 64 held-out sequences (all 512 take seconds in WebAssembly).
function evaluate() {
  train.evaluation = call('evaluate', ['number'], [64]) ?? train.evaluation;
}

function frame() {
  if (!train.running) return;
  const started = performance.now();
  const done = trainSteps(train.stepsPerFrame);
  const seconds = (performance.now() - started) / 1000;
  // About 50 ms of training per frame, so that the page stays responsive.
  if (done > 0 && seconds > 0) {
    train.stepsPerFrame = Math.max(1, Math.min(20, Math.round(0.05 / (seconds / done))));
    document.getElementById('speed').textContent = `${(done / seconds).toFixed(1)} steps/s`;
  }
  draw();
  writeState();
  if (train.running) train.frame = requestAnimationFrame(frame);
}

function start() {
  if (train.running) return;
  train.running = true;
  document.getElementById('start').disabled = true;
  document.getElementById('pause').disabled = false;
  train.frame = requestAnimationFrame(frame);
}

// (A frame already asked for is cancelled: a pause and a start within one frame leave one loop.)
function pause() {
  cancelAnimationFrame(train.frame);
  if (train.running && train.losses.length) evaluate();
  train.running = false;
  document.getElementById('start').disabled = false;
  document.getElementById('pause').disabled = true;
}

function draw() {
  document.getElementById('step-count').textContent = String(train.losses.length);
  document.getElementById('last-loss').textContent =
      train.losses.length ? web.format(train.losses[train.losses.length - 1]) : '–';
  const e = train.evaluation;
  if (e) {
    document.getElementById('eval-loss').textContent = web.format(e.loss);
    document.getElementById('eval-token').textContent = `${(100 * e.token_accuracy).toFixed(1)}%`;
    document.getElementById('eval-seq').textContent = `${(100 * e.sequence_accuracy).toFixed(1)}%`;
    document.getElementById('eval-step').textContent = `(at step ${e.step})`;
  }
  drawCurve();
  drawAttention();
}

function drawCurve() {
  const canvas = document.getElementById('curve');
  const g = canvas.getContext('2d');
  const w = canvas.width, h = canvas.height, left = 84, right = 28, top = 14, bottom = 56;
  g.clearRect(0, 0, w, h);
  g.strokeStyle = '#999';
  g.strokeRect(left, top, w - left - right, h - top - bottom);
  const total = Math.max(train.settings.steps || 1, train.losses.length);
  const high = train.losses.reduce((m, v) => Math.max(m, v), 2.5);  // (no spread: 10^6 losses)
  const x = (i) => left + (w - left - right) * (i / total);
  const y = (v) => top + (h - top - bottom) * (1 - v / high);
  // Ticks: the loss at 0, half and the top; the step at 0, half and the last.
  g.fillStyle = '#444';
  g.font = '18px sans-serif';
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  // (3 significant digits past 1000: a diverging loss of 1e30 keeps its label inside the margin)
  [0, high / 2, high].forEach((v) => g.fillText(v < 1000 ? v.toFixed(2) : v.toPrecision(3), left - 6, y(v)));
  g.textAlign = 'center';
  g.textBaseline = 'top';
  [0, Math.round(total / 2), total].forEach((i) => g.fillText(String(i), x(i), h - bottom + 4));
  g.fillText('step', left + (w - left - right) / 2, h - 24);
  g.save();
  g.translate(6, top + (h - top - bottom) / 2);
  g.rotate(-Math.PI / 2);
  g.fillText('training loss', 0, 0);
  g.restore();
  g.strokeStyle = '#c0392b';
  g.lineWidth = 2;
  g.beginPath();
  train.losses.forEach((v, i) => (i ? g.lineTo(x(i + 1), y(v)) : g.moveTo(x(i + 1), y(v))));
  g.stroke();
}

function drawAttention() {
  const holder = document.getElementById('attention');
  holder.replaceChildren();
  if (!train.model) return;
  const answer = call('attention');
  if (answer === null) return;
  const heads = train.settings.n_heads;
  answer.maps.forEach((map, k) => {
    const title = `layer ${Math.floor(k / heads) + 1}, head ${(k % heads) + 1}`;
    const table = web.table(map, { rowNames: answer.labels, columnNames: answer.labels, scale: 1,
                                   cell: () => '' });
    table.classList.add('heatmap');
    holder.append(web.element('div', { class: 'map' }, web.element('h3', {}, title), table));
  });
}

function writeState() {
  document.getElementById('state').textContent = JSON.stringify({
    settings: train.settings, step: train.losses.length, losses: train.losses,
    evaluation: train.evaluation, steps_per_second: train.stepsPerSecond ?? null,
  });
}

document.getElementById('start').addEventListener('click', start);
document.getElementById('pause').addEventListener('click', pause);
document.getElementById('step').addEventListener('click', () => {
  pause();
  trainSteps(1);
  draw();
  writeState();
});
document.getElementById('reset').addEventListener('click', () => reset());
document.getElementById('evaluate').addEventListener('click', () => {
  evaluate();
  draw();
  writeState();
});
document.getElementById('try').addEventListener('click', () => {
  document.getElementById('try-output').textContent = '';
  const answer = call('answer', ['string'], [document.getElementById('try-input').value]);
  if (answer === null) return;
  web.status('ready');
  document.getElementById('try-output').textContent =
      `→ ${answer.output.split('').join(' ')} ${answer.right ? '(right)' : '(wrong)'}`;
});
