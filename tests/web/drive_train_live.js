// Drives train_live.html as a careless visitor would (page_test.py --drive plants it in a copy of
// the site, the page opened with #settings={"digits":2,"emb_dim":16,"n_layers":1,"steps":3}) and
// writes what went wrong into <pre id="drive"> as JSON: {"failures": [...]}.
'use strict';
(() => {
  const failures = [];
  const $ = (id) => document.getElementById(id);
  const status = () => $('status').textContent;
  const expect = (ok, what) => { if (!ok) failures.push(`${what} (status: ${status()})`); };
  const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const state = () => JSON.parse($('state').textContent);
  const tryText = (text) => { $('try-input').value = text; $('try').click(); return $('try-output').textContent; };
  window.addEventListener('error', (e) => failures.push(`uncaught: ${e.message}`));

  async function drive() {
    while ($('status').dataset.ready !== 'true') await wait(20);
    // The fragment's settings without a field (digits) are used, and sent with the fields'.
    expect(state().settings.digits === 2 && state().settings.n_heads === 2,
           `settings used: ${JSON.stringify(state().settings)}`);
    expect(!document.body.textContent.includes('NaN'), 'the page shows NaN');
    // The try box: refused inputs said by character, the last answer cleared.
    expect(tryText('1 2') !== '', 'two digits with a space get no answer');
    expect(tryText('') === '' && status() === 'Ember: type exactly 2 digits, got 0', 'an empty try');
    expect(tryText('1a') === '' && status().includes("character 2 is not one ('a')"), 'a letter in the try box');
    expect(tryText('１2') === '' && status().includes('character 1 is not one'), 'a full-width digit');
    expect(tryText('123') === '' && status().includes('got more'), 'three digits for two');
    // One step, then past the schedule's end: 3 steps, no more.
    for (let i = 0; i < 5; ++i) $('step').click();
    expect(state().losses.length === 3, `${state().losses.length} losses after 5 steps of a 3-step schedule`);
    // An empty learning rate: refused by name, no model, nothing left on show.
    $('lr').value = '';
    $('reset').click();
    expect(status() === 'Ember: settings: "lr" must be a finite number in [0, 1.79769e+308], got ""',
           'an empty learning rate is not refused by name');
    expect($('attention').children.length === 0 && state().losses.length === 0,
           'a refused model leaves the last one on show');
    $('start').click();
    // (The step runs in the next animation frame, which a busy machine may delay: wait for it.)
    for (let i = 0; i < 100 && !status().startsWith('no model'); ++i) await wait(50);
    expect(status().startsWith('no model'), 'start without a model');
    // A learning rate that diverges: said, and every later call says so.
    $('lr').value = '1e30';
    $('steps').value = '50';
    $('reset').click();
    $('start').click();
    for (let i = 0; i < 100 && !status().includes('diverged'); ++i) await wait(50);
    expect(status().includes('the training diverged'), 'a diverging training is not said');
    expect(!state().losses.some((x) => !Number.isFinite(x)), 'a loss that is not finite is in the state');
    $('evaluate').click();
    expect(status().includes('the training diverged'), 'an evaluation after divergence');
  }
  drive().catch((e) => failures.push(`the drive threw: ${e.message}`)).finally(() => {
    $('drive').textContent = JSON.stringify({ failures });
  });
})();
