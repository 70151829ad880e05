// Shared by the pages of examples/web/: loaded first, before the page's script and Emscripten's.
'use strict';

// Every load the Content-Security-Policy blocked (a script, style or request from outside), counted
// into #csp-violations: the pages' tests fail unless it reads 0.
document.addEventListener('securitypolicyviolation', (event) => {
  const counter = document.getElementById('csp-violations');
  counter.textContent = String(Number(counter.textContent) + 1);
  console.error('blocked by the Content-Security-Policy:', event.violatedDirective, event.blockedURI);
});

const web = {
  // A number as the page shows it: 4 significant digits (the exact value is in #state).
  format(x) { return Number(x).toPrecision(4); },

  // A background colour for x on a scale from -scale (blue) through 0 (white) to +scale (red).
  colour(x, scale) {
    const t = Math.max(-1, Math.min(1, scale > 0 ? x / scale : 0));
    const fade = Math.round(255 * (1 - 0.6 * Math.abs(t)));  // at most 60%: the text stays legible
    return t >= 0 ? `rgb(255,${fade},${fade})` : `rgb(${fade},${fade},255)`;
  },

  // The largest absolute value of a nested list.
  maxAbs(nested) { return Math.max(0, ...nested.flat(Infinity).map(Math.abs)); },

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
