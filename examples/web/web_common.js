// Shared by the pages of examples/web/: loaded first, before the page's script and Emscripten's.
'use strict';

// Every load the Content-Security-Policy blocked (a script, style or request from outside), counted
// into #csp-violations: the pages' tests fail unless it reads 0.
document.addEventListener('securitypolicyviolation', (event) => {
  const counter = document.getElementById('csp-violations');
  counter.textContent = String(Number(counter.textContent) + 1);
  console.error('blocked by the Content-Security-Policy:', event.violatedDirective, event.blockedURI);
});

// Anything the page's scripts did not catch (an exception, a rejected promise) and an abort of
// the WebAssembly are shown in the status line, not only in the console: the page never sits on
// "loading…" or on stale numbers without saying why.
window.addEventListener('error', (event) => web.status(`page error: ${event.message}`, true));
window.addEventListener('unhandledrejection', (event) => web.status(`page error: ${event.reason}`, true));

const web = {
  // The status line: what the page is doing, or (error) what it refused and why.
  status(text, error = false) {
    const status = document.getElementById('status');
    status.textContent = text;
    if (error) status.dataset.error = 'true';
    else delete status.dataset.error;
  },

  // The settings of the URL fragment #settings=<url-encoded JSON object>, {} without a fragment;
  // an Error saying what is wrong with it otherwise (another fragment, not URL-encoded JSON, not
  // an object).
  fragmentSettings() {
    const hash = window.location.hash;
    if (hash === '' || hash === '#') return {};
    const match = /^#settings=(.*)$/s.exec(hash);
    if (!match) {  // a misspelt key would otherwise give the default settings, silently
      throw new Error(`the URL's #${hash.slice(1, 21)}${hash.length > 21 ? '…' : ''} is not #settings=<JSON>`);
    }
    let settings;
    try {
      settings = JSON.parse(decodeURIComponent(match[1]));
    } catch (e) {
      throw new Error(`the URL's #settings= is not URL-encoded JSON (${e.message})`);
    }
    if (settings === null || typeof settings !== 'object' || Array.isArray(settings)) {
      throw new Error(`the URL's #settings= must be a JSON object {"key": value, ...}, got ${String(JSON.stringify(settings)).slice(0, 40)}`);
    }
    return settings;
  },

  // The text answer of the page's C function `name` for one text argument. The text goes through
  // the heap (_malloc), not through ccall's 'string', which copies it onto the small stack: a
  // long text (a 10 MB fragment, a pasted book) would overflow it, a WebAssembly trap.
  callWithText(name, text) {
    const size = Module.lengthBytesUTF8(text) + 1;
    const pointer = Module._malloc(size);
    if (!pointer) return JSON.stringify({ error: `no memory for a text of ${size} bytes` });
    try {
      Module.stringToUTF8(text, pointer, size);
      return Module.ccall(name, 'string', ['number'], [pointer]);
    } finally {
      Module._free(pointer);
    }
  },

  // A number as the page shows it: 4 significant digits (the exact value is in #state). Ember
  // writes NaN and the infinities as the strings "nan", "inf" and "-inf": shown as they are.
  format(x) { return typeof x === 'number' ? x.toPrecision(4) : String(x); },

  // A background colour for x on a scale from -scale (blue) through 0 (white) to +scale (red);
  // grey for what is not a finite number ("nan", "inf").
  colour(x, scale) {
    if (typeof x !== 'number' || !Number.isFinite(x)) return 'rgb(200,200,200)';
    const t = Math.max(-1, Math.min(1, scale > 0 && Number.isFinite(scale) ? x / scale : 0));
    const fade = Math.round(255 * (1 - 0.6 * Math.abs(t)));  // at most 60%: the text stays legible
    return t >= 0 ? `rgb(255,${fade},${fade})` : `rgb(${fade},${fade},255)`;
  },

  // The largest absolute finite value of a nested list.
  maxAbs(nested) {
    return nested.flat(Infinity).reduce((m, x) => (Number.isFinite(x) ? Math.max(m, Math.abs(x)) : m), 0);
  },

  element(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    for (const child of children) node.append(child);
    return node;
  },

  // A table of a 2-d (or 1-d) nested list, rows labelled by rowNames and columns by columnNames,
  // each cell coloured on the table's own scale. cell(value, i, j) may return a node instead.
  table(values, { rowNames = [], columnNames = [], scale, cell } = {}) {
    const rows = Array.isArray(values[0]) ? values : [values];
    const top = scale === undefined ? web.maxAbs(rows) : scale;
    const table = web.element('table', { class: 'matrix' });
    if (columnNames.length) {
      table.append(web.element('tr', {}, web.element('th'), ...columnNames.map((n) => web.element('th', {}, n))));
    }
    rows.forEach((row, i) => {
      const tr = web.element('tr', {}, web.element('th', {}, rowNames[i] ?? ''));
      row.forEach((x, j) => {
        const td = web.element('td');
        td.style.background = web.colour(x, top);  // through the CSSOM: the CSP forbids style attributes
        td.append(cell ? cell(x, i, j) : web.format(x));
        tr.append(td);
      });
      table.append(tr);
    });
    return table;
  },
};
