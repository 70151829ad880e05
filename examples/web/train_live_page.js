// train_live.html's script: drives the training (train_live.cpp compiled to WebAssembly) a few
// steps per animation frame, and draws the loss curve, the held-out numbers and the attention maps.
'use strict';

const train = {
  settings: {},
  losses: [],
  evaluation: null,
  running: false,
  stepsPerFrame: 1,
  started: 0,
};

var Module = {
  print: (text) => console.log(text),
  printErr: (text) => console.error(text),
  onRuntimeInitialized: () => {
    const fragment = /^#settings=(.*)$/.exec(window.location.hash);
    const settings = fragment ? JSON.parse(decodeURIComponent(fragment[1])) : {};
    for (const key of ['lr', 'emb_dim', 'n_heads', 'n_layers', 'steps']) {
      if (key in settings) document.getElementById(key).value = String(settings[key]);
    }
    reset();
    if (settings.run) {
      const started = performance.now();
      trainSteps(settings.run);
      const seconds = (performance.now() - started) / 1000;
      // (Under a headless browser's virtual time the clock stands still: no speed then.)
      if (seconds > 0) {
        document.getElementById('speed').textContent = `${(settings.run / seconds).toFixed(1)} steps/s`;
        train.stepsPerSecond = settings.run / seconds;
      }
      evaluate();
    }
    draw();
    const status = document.getElementById('status');
    status.textContent = `ready (${performance.now().toFixed(0)} ms after the page began to load)`;
    status.dataset.ready = 'true';
    writeState();
  },
};

// Calls one of train_live.cpp's functions; its JSON answer, or null after showing its error.
function call(name, types = [], args = []) {
  const answer = JSON.parse(Module.ccall(`ember_train_live_${name}`, 'string', types, args));
  if (answer.error) {
    document.getElementById('status').textContent = `Ember: ${answer.error}`;
    pause();
    return null;
  }
  return answer;
}

function currentSettings() {
  const number = (id) => Number(document.getElementById(id).value);
  return { lr: number('lr'), emb_dim: number('emb_dim'), n_heads: number('n_heads'),
           n_layers: number('n_layers'), steps: number('steps') };
}

function reset() {
  pause();
  train.settings = currentSettings();
  train.losses = [];
  train.evaluation = null;
  if (call('reset', ['string'], [JSON.stringify(train.settings)]) === null) return;
  draw();
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
  if (train.running) requestAnimationFrame(frame);
}

function start() {
  if (train.running) return;
  train.running = true;
  document.getElementById('start').disabled = true;
  document.getElementById('pause').disabled = false;
  requestAnimationFrame(frame);
}

function pause() {
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
  const high = Math.max(2.5, ...train.losses);
  const x = (i) => left + (w - left - right) * (i / total);
  const y = (v) => top + (h - top - bottom) * (1 - v / high);
  // Ticks: the loss at 0, half and the top; the step at 0, half and the last.
  g.fillStyle = '#444';
  g.font = '18px sans-serif';
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  [0, high / 2, high].forEach((v) => g.fillText(v.toFixed(2), left - 6, y(v)));
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
  const answer = call('attention');
  if (answer === null) return;
  const holder = document.getElementById('attention');
  holder.replaceChildren();
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
document.getElementById('reset').addEventListener('click', reset);
document.getElementById('evaluate').addEventListener('click', () => {
  evaluate();
  draw();
  writeState();
});
document.getElementById('try').addEventListener('click', () => {
  const answer = call('answer', ['string'], [document.getElementById('try-input').value]);
  if (answer === null) return;
  document.getElementById('try-output').textContent =
      `→ ${answer.output.split('').join(' ')} ${answer.right ? '(right)' : '(wrong)'}`;
});
