// Drives attention_live.html as a careless visitor would (page_test.py --drive plants it in a
// copy of the site, the page opened with #settings={"heads":2.5}) and writes what went wrong
// into <pre id="drive"> as JSON: {"failures": [...]}.
'use strict';
(() => {
  const failures = [];
  const $ = (id) => document.getElementById(id);
  const status = () => $('status').textContent;
  const expect = (ok, what) => { if (!ok) failures.push(`${what} (status: ${status()})`); };
  const edit = (input, value) => { input.value = value; input.dispatchEvent(new Event('input')); };
  const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  window.addEventListener('error', (e) => failures.push(`uncaught: ${e.message}`));

  async function drive() {
    while ($('status').dataset.ready !== 'true') await wait(20);
    // Settings refused at load: said, nothing drawn; a change of heads then starts afresh.
    expect(status().startsWith('Ember: settings: "heads" must be an integer'), 'the refused fragment is not said');
    expect($('inputs').querySelectorAll('input').length === 0, 'refused settings still drew editors');
    $('heads').value = '1';
    $('heads').dispatchEvent(new Event('change'));
    const inputs = $('inputs').querySelectorAll('input');
    expect(inputs.length === 18, `after heads 1, ${inputs.length} input editors, not 18`);
    expect(status().startsWith('ready'), 'after heads 1 the page is not ready');
    if (inputs.length !== 18) return;
    // 200 edits: the memory stays where it is.
    const before = Module.HEAP8.buffer.byteLength;
    for (let i = 0; i < 200; ++i) edit(inputs[i % 18], String((i % 7) / 10));
    const after = Module.HEAP8.buffer.byteLength;
    expect(after === before, `200 edits grew the WebAssembly memory from ${before} to ${after} B`);
    // Not a number, out of float32's range, overflowing float32: each said; a good edit clears it.
    edit(inputs[0], '');
    expect(status().includes('not a number'), 'an empty field is not said');
    edit(inputs[0], '1e39');
    expect(status().includes("inputs[0][0] must be a finite number within float32's range"), '1e39 is not refused by name');
    edit(inputs[0], '1e20');
    expect(status().startsWith('the loss is nan'), 'a NaN loss is not said');
    expect($('loss').textContent === 'nan', `the NaN loss shows as ${$('loss').textContent}`);
    edit(inputs[0], '0.3');
    expect(status() === 'ready', 'a good edit leaves the last message');
    // Back to the chapter's numbers: the chapter's, not the fragment's.
    $('reset').click();
    expect($('heads').value === '2' && $('loss').textContent === '0.1218',
           `back to the chapter's numbers gives heads ${$('heads').value}, loss ${$('loss').textContent}`);
  }
  drive().catch((e) => failures.push(`the drive threw: ${e.message}`)).finally(() => {
    $('drive').textContent = JSON.stringify({ failures });
  });
})();
