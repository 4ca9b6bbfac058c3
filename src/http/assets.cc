#include "assets.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <array>
#include <cstdint>
#include <stdexcept>

namespace sluice::http {
namespace {

constexpr std::string_view kStyle = R"css(
:root { color-scheme: light dark; --fg: #1f2328; --bg: #ffffff; --panel: #f6f8fa; --muted: #59636e;
  --line: #d1d9e0; --accent: #0969da; --warn-bg: #fff8c5; --warn-line: #d4a72c; --ok-bg: #dafbe1;
  --ok-line: #4ac26b; --num: #8c959f; --mark: #fff8c5;
  --del: #82071e; --del-bg: #ffebe9; --add: #116329; --add-bg: #dafbe1;
  --kw: #cf222e; --ty: #8250df; --str: #0a3069; --com: #59636e; --numc: #0550ae; --pre: #953800;
  --fn: #6639ba; --sym: #1f2328; --var: #953800; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --bg: #0d1117; --panel: #161b22; --muted: #9198a1; --line: #3d444d;
    --accent: #4493f8; --warn-bg: #2e2a1a; --warn-line: #9e6a03; --ok-bg: #12261e; --ok-line: #2ea043;
    --num: #6e7681; --mark: #3b2f0f;
    --del: #ffdcd7; --del-bg: #67060c; --add: #aff5b4; --add-bg: #033a16;
    --kw: #ff7b72; --ty: #d2a8ff; --str: #a5d6ff; --com: #8b949e; --numc: #79c0ff; --pre: #ffa657;
    --fn: #d2a8ff; --sym: #e6edf3; --var: #ffa657; }
}
* { box-sizing: border-box; }
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  background: var(--bg); margin: 0 auto; max-width: 72rem; padding: 0.75rem 1rem 2rem; }
header.top { display: flex; align-items: baseline; gap: 1rem; flex-wrap: wrap;
  border-bottom: 1px solid var(--line); margin-bottom: 1rem; padding-bottom: .5rem; }
header.top a.brand { font-weight: 700; font-size: 1.25rem; color: var(--fg); text-decoration: none; }
header.top nav { margin-left: auto; display: flex; gap: 1rem; font-size: .95rem; }
a { color: var(--accent); }
h1 { font-size: 1.4rem; margin: .5rem 0 1rem; }
pre, textarea, code { font: 14px/1.5 ui-monospace, SFMono-Regular, "DejaVu Sans Mono", Menlo, monospace; }
textarea { width: 100%; min-height: 22rem; color: inherit; background: var(--panel);
  border: 1px solid var(--line); border-radius: 6px; padding: .75rem; resize: vertical; tab-size: 4; }
.controls { display: flex; flex-wrap: wrap; gap: .75rem 1.25rem; align-items: center; margin: .75rem 0; }
select, button, .button { font: inherit; color: var(--fg); background: var(--panel);
  border: 1px solid var(--line); border-radius: 6px; padding: .35rem .75rem; text-decoration: none;
  cursor: pointer; display: inline-block; line-height: 1.4; }
button.primary { background: #1f883d; color: #fff; border-color: #1a7f37; font-weight: 600; }
button:hover, .button:hover { border-color: var(--accent); }
.hint, .meta { color: var(--muted); font-size: .9rem; }
.toolbar { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: .5rem 0 .75rem; }
.toolbar .meta { margin-right: auto; }
.toolbar h1 { font-size: 1.1rem; margin: 0; }
.toolbar h1 code { font-size: 1rem; }
.notice { border: 1px solid var(--ok-line); background: var(--ok-bg); border-radius: 6px;
  padding: .75rem 1rem; margin-bottom: 1rem; }
.notice.warn, .problem { border-color: var(--warn-line); background: var(--warn-bg); }
.problem { border: 1px solid var(--warn-line); border-radius: 6px; padding: 1rem 1.25rem; }
.linkrow { display: flex; gap: .5rem; flex-wrap: wrap; align-items: center; margin: .35rem 0; }
.linkrow input { flex: 1 1 18rem; font: 14px ui-monospace, monospace; padding: .35rem .5rem;
  color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: 6px; }
pre.code { background: var(--panel); border: 1px solid var(--line); border-radius: 6px;
  padding: .75rem .75rem .75rem 4.25rem; overflow-x: auto; white-space: pre-wrap;
  overflow-wrap: anywhere; counter-reset: line; margin: 0; }
pre.code .l { counter-increment: line; }
pre.code .l::before { content: counter(line); display: inline-block; width: 3rem;
  margin-left: -3.75rem; margin-right: .75rem; text-align: right; color: var(--num);
  user-select: none; -webkit-user-select: none; cursor: pointer; }
pre.code:not(.js-lines) .l:target, pre.code .l.sel { background: var(--mark); }
pre.code:not(.js-lines) .l:target::before, pre.code .l.sel::before { color: var(--fg);
  font-weight: 600; }
.hl-keyword { color: var(--kw); } .hl-type, .hl-classname, .hl-usertype { color: var(--ty); }
.hl-string, .hl-regexp, .hl-value { color: var(--str); }
.hl-comment, .hl-todo { color: var(--com); font-style: italic; }
.hl-number { color: var(--numc); } .hl-preproc, .hl-label { color: var(--pre); }
.hl-function, .hl-predef_func { color: var(--fn); } .hl-symbol, .hl-cbracket { color: var(--sym); }
.hl-variable, .hl-predef_var, .hl-attribute, .hl-property { color: var(--var); }
.hl-specialchar { color: var(--numc); } .hl-url { color: var(--accent); text-decoration: underline; }
.hl-oldfile { color: var(--del); background: var(--del-bg); }
.hl-newfile { color: var(--add); background: var(--add-bg); }
.hl-difflines { color: var(--accent); font-weight: 600; }
article.markdown { overflow-wrap: anywhere; }
article.markdown pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px;
  padding: .75rem; overflow-x: auto; }
article.markdown code { background: var(--panel); border-radius: 4px; padding: 0 .2rem; }
article.markdown pre code { background: none; padding: 0; }
article.markdown table { width: auto; margin: .75rem 0; }
article.markdown th, article.markdown td { border: 1px solid var(--line); }
article.markdown blockquote { margin: .5rem 0; padding: 0 1rem; color: var(--muted);
  border-left: 3px solid var(--line); }
article.markdown li.task-list-item, article.markdown ul:has(> li > input) { list-style: none; }
article.markdown ul ul ul ul ul ul ul ul { padding-left: .5rem; }
.rung { font-size: .8rem; border: 1px solid var(--line); border-radius: 1rem; padding: 0 .5rem; }
table { border-collapse: collapse; width: 100%; font-size: .92rem; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); }
td code { font-size: .8rem; overflow-wrap: anywhere; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(21rem, 1fr)); gap: 1rem; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .75rem 1rem; background: var(--panel); }
.card h2 { font-size: 1rem; margin: 0 0 .5rem; }
th.n { text-align: right; }
.card .meta { margin: 0 0 .5rem; }
.chart { width: 100%; height: auto; display: block; margin: .25rem 0 .5rem; }
.chart text { fill: var(--muted); font: 11px system-ui, -apple-system, "Segoe UI", sans-serif; }
.chart text.unit { font-weight: 600; }
.chart line.grid { stroke: var(--line); stroke-width: 1; }
.chart polyline { fill: none; stroke-width: 1.75; stroke-linejoin: round; }
.swatch { display: inline-block; width: .7rem; height: .7rem; border-radius: 2px; margin-right: .4rem; }
.js-only[hidden] { display: none !important; }
/* The encrypted paste's page shows its parts as its script gets there: a flex toolbar that is
   hidden must stay hidden (author CSS outranks the hidden attribute otherwise). */
#encrypted [hidden] { display: none !important; }
input.views { width: 5.5rem; font: inherit; color: inherit; background: var(--bg);
  border: 1px solid var(--line); border-radius: 6px; padding: .3rem .5rem; }
@media (max-width: 40rem) {
  body { padding: .5rem .6rem 1.5rem; }
  pre.code { padding-left: 3.25rem; font-size: 13px; }
  pre.code .l::before { width: 2.25rem; margin-left: -2.9rem; margin-right: .6rem; }
  textarea { min-height: 16rem; }
}
)css";

constexpr std::string_view kAppJs =
    R"js(// sluice: conveniences only; every page works without this file.
'use strict';
(function () {
  function flash(button, text) {
    const old = button.textContent;
    button.textContent = text;
    setTimeout(function () { button.textContent = old; }, 1500);
  }
  function copy(text, button) {
    const done = function () { flash(button, 'Copied'); };
    const fallback = function () {
      const area = document.createElement('textarea');
      area.value = text;
      area.setAttribute('readonly', '');
      area.style.position = 'fixed';
      area.style.opacity = '0';
      document.body.appendChild(area);
      area.select();
      try { document.execCommand('copy'); done(); } catch (e) { flash(button, 'Copy failed'); }
      area.remove();
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  }
  document.querySelectorAll('.js-only').forEach(function (el) { el.hidden = false; });
  document.querySelectorAll('[data-copy-from]').forEach(function (button) {
    button.addEventListener('click', function () {
      const source = document.getElementById(button.getAttribute('data-copy-from'));
      if (!source) return;
      const text = 'value' in source && source.tagName !== 'PRE' ? source.value : source.textContent;
      copy(text, button);
    });
  });
  // Line links: #L10 is marked by CSS alone (:target); a range #L10-L20 and the clicks that make
  // links (a line number sets #LN, shift-click extends it to a range) need this script. The
  // number is the line's ::before, so a click on it lands on the line's element in the gutter.
  const code = document.getElementById('code');
  if (code && code.querySelector('.l')) {
    // From here the script marks lines (.sel): :target would keep marking the line loaded.
    code.classList.add('js-lines');
    let anchor = 0;
    const range = function () {
      const m = /^#L(\d+)(?:-L(\d+))?$/.exec(location.hash);
      if (!m) return null;
      const a = parseInt(m[1], 10), b = m[2] ? parseInt(m[2], 10) : a;
      return [Math.min(a, b), Math.max(a, b)];
    };
    const mark = function (scroll) {
      code.querySelectorAll('.l.sel').forEach(function (el) { el.classList.remove('sel'); });
      const r = range();
      if (!r) return;
      if (scroll) anchor = r[0];
      for (let n = r[0]; n <= r[1]; n++) {
        const el = document.getElementById('L' + n);
        if (!el) break;
        el.classList.add('sel');
      }
      const first = document.getElementById('L' + r[0]);
      if (scroll && first) first.scrollIntoView({ block: 'center' });
    };
    code.addEventListener('click', function (e) {
      const line = e.target;
      if (!line.classList || !line.classList.contains('l')) return;
      const gutter = code.getBoundingClientRect().left + parseFloat(getComputedStyle(code).paddingLeft);
      if (e.clientX >= gutter) return;
      const n = parseInt(line.id.slice(1), 10);
      const hash = e.shiftKey && anchor && anchor !== n
        ? '#L' + Math.min(anchor, n) + '-L' + Math.max(anchor, n) : '#L' + n;
      if (!e.shiftKey) anchor = n;
      // replaceState keeps the page still (a new hash would jump); :target then lags, .sel leads.
      history.replaceState(null, '', hash);
      mark(false);
      e.preventDefault();
    });
    window.addEventListener('hashchange', function () { mark(true); });
    mark(true);
  }
  const form = document.getElementById('create');
  if (form) {
    const area = form.querySelector('textarea');
    // A fork of a large paste: the page does not carry the text (src/http/pages.cc, IndexPage),
    // so it is loaded here from the raw link, as text, never as markup.
    const from = area.getAttribute('data-prefill-from');
    if (from) {
      area.disabled = true;
      fetch(from, { credentials: 'same-origin' })
        .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.text(); })
        .then(function (text) { area.value = text; })
        .catch(function () {
          const problem = document.getElementById('create-problem');
          if (problem) {
            problem.textContent = 'The text could not be loaded: copy it from the raw link above.';
            problem.hidden = false;
          }
        })
        .finally(function () { area.disabled = false; });
    }
    area.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        // requestSubmit runs the submit handlers (the encryption's among them); submit() would not.
        if (form.requestSubmit) form.requestSubmit();
        else if (form.reportValidity()) form.submit();
      }
      if (e.key === 'Tab' && !e.shiftKey && !e.ctrlKey && !e.altKey) {
        // A tab in a paste is text; Escape then Tab still leaves the box.
        e.preventDefault();
        const s = area.selectionStart, t = area.selectionEnd;
        area.setRangeText('\t', s, t, 'end');
      }
    });
  }
})();
)js";

constexpr std::string_view kStatusJs =
    R"js(// sluice /status: polls /api/v1/status (the registry /metrics renders) every 2 s and draws each
// panel: a chart of the last 5 minutes with its unit and time axis, and the values now, in words.
'use strict';
(function () {
  const root = document.getElementById('live');
  if (!root) return;
  const POLL_MS = 2000, WINDOW_MIN = 5, WINDOW_MS = WINDOW_MIN * 60000;
  const SVG = 'http://www.w3.org/2000/svg';
  const COLORS = ['#0969da', '#cf222e', '#1a7f37', '#8250df', '#bf8700', '#e16f24', '#1b7c83', '#6e7781'];

  // The one table that turns /metrics' names and label values into words. A value missing here is
  // shown with its underscores as spaces, so a reason added later still reads as words.
  const WORDS = {
    pool: { create: 'create slots', read: 'read slots', fill: 'cache-fill slots',
      highlight: 'highlighter slots', view: 'view slots' },
    reason: {
      ip_create_count: 'creates from one visitor (429)',
      ip_create_bytes: 'bytes from one visitor (429)',
      global_count: 'creates from everyone (429)',
      global_bytes: 'bytes from everyone (429)',
      origin_get_ip: 'reads from one visitor (429)',
      create_slots: 'create slots full (503)',
      create_slots_per_client: "one visitor's create slots full (503)",
      create_bytes: 'create bytes full (503)',
      read_slots: 'read slots full (503)',
      fill_cap: 'cache-fill slots full (503)',
      connections: 'connections full (503)',
      connections_per_client: "one visitor's connections full (503)",
      view_shed_for_load: 'views shown plain: highlighter busy',
      view_render_failed: 'views shown plain: render failed',
      view_render_timeout: 'views shown plain: render too slow',
    },
    status: { 200: '200 OK', 201: '201 created', 204: '204 deleted', 304: '304 not modified',
      400: '400 bad request', 401: '401 no token', 404: '404 not found', 405: '405 wrong method',
      408: '408 too slow', 411: '411 no length', 413: '413 too large', 429: '429 rate limit',
      451: '451 withheld', 500: '500 server error', 503: '503 overloaded', 504: '504 timed out',
      507: '507 storage full' },
    dependency: { meta: 'metadata store', blob: 'body store', redis: 'shared cache' },
    // sluice_breaker_state's numbers, as src/service/dependency.cc exports them.
    breaker: { 0: 'closed', 1: 'open', 2: 'half-open' },
  };
  // Breaker states drawn bottom to top: closed, half-open, open (worse is higher).
  const BREAKER_LEVEL = { 0: 0, 2: 1, 1: 2 };
  const BREAKER_BY_LEVEL = [0, 2, 1];

  function word(kind, value) {
    const table = WORDS[kind] || {};
    return value in table ? table[value] : String(value).replace(/_/g, ' ');
  }

  // Two or three significant digits, no trailing zeros: 1,234 and 12.3 and 0.05.
  function decimal(v) {
    const a = Math.abs(v);
    if (a >= 100) return Math.round(v).toLocaleString('en-US');
    return String(Number(v.toFixed(a >= 10 ? 1 : 2)));
  }
  function count(v) { return Math.round(v).toLocaleString('en-US'); }
  function bytes(v) {
    if (v < 1000) return count(v) + ' bytes';
    const units = ['KB', 'MB', 'GB', 'TB'];
    let i = -1;
    do { v /= 1000; i += 1; } while (v >= 1000 && i < units.length - 1);
    return (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + ' ' + units[i];
  }
  function duration(seconds) {
    if (seconds < 1) return decimal(seconds * 1000) + ' ms';
    if (seconds < 60) return decimal(seconds) + ' s';
    const s = Math.round(seconds);
    if (s < 3600) return Math.floor(s / 60) + ' min' + (s % 60 ? ' ' + (s % 60) + ' s' : '');
    const min = Math.floor((s % 3600) / 60);
    return Math.floor(s / 3600) + ' h' + (min ? ' ' + min + ' min' : '');
  }
  function percent(share) { return decimal(100 * share) + ' %'; }

  // How each chart's unit is named on its axis and written in its table.
  const UNITS = {
    slots: { axis: 'slots', integer: true, tick: count, value: count },
    rate: { axis: 'per second', tick: decimal, value: function (v) { return decimal(v) + ' per second'; } },
    ms: { axis: 'ms', tick: decimal, value: function (v) { return decimal(v) + ' ms'; } },
    seconds: { axis: 'seconds', tick: decimal, value: duration },
    bytes: { axis: 'bytes', integer: true, tick: bytes, value: bytes },
    reports: { axis: 'reports', integer: true, tick: count, value: count },
    breaker: { axis: 'state', step: true, levels: 3,
      tick: function (level) { return word('breaker', BREAKER_BY_LEVEL[level]); },
      value: function (level) { return word('breaker', BREAKER_BY_LEVEL[level]); } },
  };

  let previous = null;
  const history = {};

  function parse(key) {
    const brace = key.indexOf('{');
    const labels = {};
    if (brace >= 0) {
      const re = /(\w+)="((?:[^"\\]|\\.)*)"/g;
      let m;
      while ((m = re.exec(key.slice(brace))) !== null) labels[m[1]] = m[2];
    }
    return { name: brace < 0 ? key : key.slice(0, brace), labels: labels };
  }
  function series(metrics, name) {
    const out = [];
    for (const key in metrics) {
      const p = parse(key);
      if (p.name === name) out.push({ labels: p.labels, value: metrics[key], key: key });
    }
    return out;
  }
  function first(metrics, name) {
    const s = series(metrics, name);
    return s.length ? s[0].value : undefined;
  }
  function push(chart, id, t, value) {
    const h = history[chart] || (history[chart] = {});
    const s = h[id] || (h[id] = []);
    s.push({ t: t, v: value });
    while (s.length && s[0].t < t - WINDOW_MS - POLL_MS) s.shift();
  }
  function rate(now, prev, key, seconds) {
    if (!prev || !(key in prev.metrics) || seconds <= 0) return 0;
    return Math.max(0, (now.metrics[key] - prev.metrics[key]) / seconds);
  }

  function el(tag, attrs, text) {
    const e = tag === 'svg' || tag === 'line' || tag === 'polyline' || tag === 'text' || tag === 'rect'
      ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function panel(id, title, note) {
    let card = document.getElementById('card-' + id);
    if (!card || !card.hasAttribute('data-live')) {
      const fresh = el('section', { class: 'card', id: 'card-' + id, 'data-live': '' });
      fresh.appendChild(el('h2', {}, title));
      if (note) fresh.appendChild(el('p', { class: 'meta' }, note));
      fresh.appendChild(el('div', { class: 'body' }));
      if (card) card.replaceWith(fresh); else root.appendChild(fresh);
      card = fresh;
    }
    return card;
  }
  function body(card) {
    const b = card.querySelector('.body');
    while (b.firstChild) b.removeChild(b.firstChild);
    return b;
  }

  function niceTicks(max, integer) {
    if (!(max > 0)) max = 1;
    const p = Math.pow(10, Math.floor(Math.log10(max)));
    const f = max / p;
    let top = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
    if (integer) top = Math.max(1, Math.ceil(top));
    const half = top / 2;
    return integer && half !== Math.round(half) ? [0, top] : [0, half, top];
  }
  // Hand-written SVG, sized to the card in pixels so text is never stretched: a few lines and
  // labels do not justify a charting library that sluice would have to serve and keep.
  function chart(parent, title, unit, lines, t) {
    const width = Math.max(240, Math.round(parent.getBoundingClientRect().width) || 320);
    const height = 132, left = 58, right = 14, top = 18, bottom = 22;
    const svg = el('svg', { class: 'chart', viewBox: '0 0 ' + width + ' ' + height, role: 'img',
      'aria-label': title + ' over the last ' + WINDOW_MIN + ' minutes, in ' + unit.axis +
        '; the table below has the values now' });
    let max = 0;
    lines.forEach(function (l) { l.points.forEach(function (p) { if (p.v > max) max = p.v; }); });
    const ticks = unit.levels
      ? Array.from({ length: unit.levels }, function (_, i) { return i; })
      : niceTicks(max, unit.integer);
    const ceiling = ticks[ticks.length - 1] || 1;
    const x = function (when) { return left + (width - left - right) * (1 - (t - when) / WINDOW_MS); };
    const y = function (v) { return top + (height - top - bottom) * (1 - Math.min(v, ceiling) / ceiling); };
    svg.appendChild(el('text', { x: 0, y: 11, class: 'unit' }, unit.axis));
    ticks.forEach(function (v) {
      svg.appendChild(el('line', { x1: left, x2: width - right, y1: y(v), y2: y(v), class: 'grid' }));
      svg.appendChild(el('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end' }, unit.tick(v)));
    });
    for (let m = WINDOW_MIN; m >= 0; m -= 1) {
      const at = x(t - m * 60000);
      svg.appendChild(el('line', { x1: at, x2: at, y1: height - bottom, y2: height - bottom + 4, class: 'grid' }));
      svg.appendChild(el('text', { x: at, y: height - 4, 'text-anchor': 'middle' },
        m === 0 ? 'now' : '\u2212' + m + ' min'));
    }
    lines.forEach(function (l) {
      const pts = [];
      l.points.forEach(function (p, i) {
        if (p.t < t - WINDOW_MS) return;
        if (unit.step && i > 0) pts.push(x(p.t).toFixed(1) + ',' + y(l.points[i - 1].v).toFixed(1));
        pts.push(x(p.t).toFixed(1) + ',' + y(p.v).toFixed(1));
      });
      if (pts.length) svg.appendChild(el('polyline', { points: pts.join(' '), stroke: l.color }));
    });
    parent.appendChild(svg);
  }
  // rows: [{id, name, cells: [text...], color, value}]; a row with a color is a line on the chart.
  function table(parent, headers, rows, empty) {
    const tab = el('table');
    const head = el('tr');
    headers.forEach(function (h, i) { head.appendChild(el('th', i ? { class: 'n', scope: 'col' } : { scope: 'col' }, h)); });
    tab.appendChild(el('thead')).appendChild(head);
    const tbody = tab.appendChild(el('tbody'));
    if (!rows.length) {
      tbody.appendChild(el('tr')).appendChild(el('td', { colspan: headers.length, class: 'meta' }, empty || 'none'));
    }
    rows.forEach(function (r) {
      const tr = el('tr', r.id !== undefined ? { 'data-series': r.id, 'data-value': r.value } : {});
      const name = el('td');
      if (r.color) {
        // Through the CSSOM: the page's CSP refuses style attributes.
        const swatch = name.appendChild(el('i', { class: 'swatch' }));
        swatch.style.background = r.color;
      }
      name.appendChild(document.createTextNode(r.name));
      tr.appendChild(name);
      r.cells.forEach(function (c) { tr.appendChild(el('td', { class: 'n' }, c)); });
      tbody.appendChild(tr);
    });
    parent.appendChild(tab);
  }
  // A chart of one history entry and the table of its series now: ids sorted by name, series that
  // never left zero in the window left off when hideZero (most refusal reasons, most of the time).
  function timeline(id, title, unit, names, t, opts) {
    opts = opts || {};
    const card = panel(id, title, opts.note);
    const b = body(card);
    const h = history[id] || {};
    const ids = Object.keys(h).filter(function (k) {
      return !opts.hideZero || h[k].some(function (p) { return p.v > 0; });
    }).sort(function (a, b2) { return names(a).localeCompare(names(b2)); });
    const lines = ids.map(function (k, i) { return { id: k, points: h[k], color: COLORS[i % COLORS.length] }; });
    chart(b, title, unit, lines, t);
    const rows = lines.map(function (l) {
      const last = l.points[l.points.length - 1].v;
      return { id: l.id, name: names(l.id), color: l.color, value: last,
        cells: [unit.value(last)].concat(opts.extra ? opts.extra(l.id) : []) };
    });
    table(b, opts.headers || ['What', 'Now'], rows.concat(opts.rows || []), opts.empty);
    return card;
  }

  function storagePanel(m, t) {
    const live = first(m, 'sluice_storage_live_bytes');
    if (live === undefined) return;
    const quota = first(m, 'sluice_storage_quota_bytes') || 0;
    push('storage', 'live', t, live);
    if (quota > 0) push('storage', 'quota', t, quota);
    const names = function (k) { return k === 'live' ? 'live pastes' : 'quota'; };
    const day = first(m, 'sluice_storage_created_bytes_24h');
    const plan = first(m, 'sluice_plan_put_bytes_per_day') || 0;
    const refused = first(m, 'sluice_storage_quota_refusals_total');
    const rows = [];
    if (quota > 0) {
      rows.push({ name: 'used', cells: [percent(live / quota) + ' of the quota'] });
    } else {
      rows.push({ name: 'quota', cells: ['none (max_storage_bytes = 0)'] });
    }
    if (day !== undefined) {
      rows.push({ name: 'created in the last 24 h (this process)',
        cells: [bytes(day) + (plan > 0 ? ' of ' + bytes(plan) + ' a day planned' : '')] });
    }
    if (refused !== undefined) rows.push({ name: 'creates refused for the quota (507)', cells: [count(refused)] });
    timeline('storage', 'Storage against the quota', UNITS.bytes, names, t, { rows: rows,
      note: 'Creates that would pass the quota answer 507 storage_quota.' });
  }

  function reportsPanel(now, t) {
    const m = now.metrics;
    let pending = first(m, 'sluice_reports_pending');
    if (pending === undefined && typeof now.reports_pending === 'number') pending = now.reports_pending;
    const existing = document.getElementById('card-reports');
    if (pending === undefined) {
      if (existing) existing.hidden = true;
      return;
    }
    push('reports', 'pending', t, pending);
    const card = timeline('reports', 'Reports pending review', UNITS.reports,
      function () { return 'reports waiting'; }, t, { note: 'Pastes reported by visitors that the operator has not reviewed (sluice admin).' });
    card.hidden = false;
  }

  // Buckets of "le" (share of the budget used) are read as a Prometheus histogram: cumulative. A
  // count that goes down cannot be cumulative, so such a list is taken per bucket as it stands.
  function budgetBuckets(list) {
    const cumulative = list.every(function (b, i) { return i === 0 || b.keys >= list[i - 1].keys; });
    return list.map(function (b, i) {
      const lower = i === 0 ? 0 : Number(list[i - 1].le);
      const upper = b.le === '+Inf' || b.le === Infinity ? null : Number(b.le);
      return { upper: upper, label: upper === null ? 'over ' + percent(lower) : (i === 0 ? 'up to ' : percent(lower) + ' to ') + percent(upper),
        keys: cumulative && i > 0 ? b.keys - list[i - 1].keys : b.keys };
    });
  }
  // Aggregates only: which keys and networks are behind them is the admin listener's to say
  // (sluice admin top), since any name here would tie new pastes to their creators' networks.
  function abusePanels(now) {
    const a = now.abuse;
    const empty = 'no data';
    const over = a && a.window_seconds ? ' Over the last ' + duration(a.window_seconds) + '.' : '';
    const b = body(panel('budget', 'Budget use across client keys',
      'Many keys each under budget is growth; a few keys at their budget is abuse.' + over +
      ' Who they are: sluice admin top, on the admin listener.'));
    const list = a && Array.isArray(a.budget_use) ? budgetBuckets(a.budget_use) : [];
    if (list.length) {
      const width = Math.max(240, Math.round(b.getBoundingClientRect().width) || 320);
      const height = 132, left = 58, right = 10, top = 18, bottom = 22;
      const max = list.reduce(function (x, r) { return Math.max(x, r.keys); }, 0);
      const ticks = niceTicks(max, true), ceiling = ticks[ticks.length - 1];
      const svg = el('svg', { class: 'chart', viewBox: '0 0 ' + width + ' ' + height, role: 'img',
        'aria-label': 'Client keys by share of their create budget used; the table below has the counts' });
      svg.appendChild(el('text', { x: 0, y: 11, class: 'unit' }, 'keys'));
      const y = function (v) { return top + (height - top - bottom) * (1 - v / ceiling); };
      ticks.forEach(function (v) {
        svg.appendChild(el('line', { x1: left, x2: width - right, y1: y(v), y2: y(v), class: 'grid' }));
        svg.appendChild(el('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end' }, count(v)));
      });
      const slot = (width - left - right) / list.length;
      list.forEach(function (r, i) {
        svg.appendChild(el('rect', { x: left + i * slot + 2, y: y(r.keys), width: Math.max(1, slot - 4),
          height: y(0) - y(r.keys), fill: COLORS[0] }));
      });
      // Each bar is labelled with its bucket's upper bound; the table spells the buckets out.
      list.forEach(function (r, i) {
        svg.appendChild(el('text', { x: left + (i + 0.5) * slot, y: height - 4, 'text-anchor': 'middle' },
          r.upper === null ? 'more' : '\u2264 ' + percent(r.upper)));
      });
      b.appendChild(svg);
    }
    const rows = list.map(function (r) { return { name: r.label, cells: [count(r.keys)] }; });
    if (a && typeof a.global_cap_saturation === 'number') {
      rows.push({ name: 'global create cap used', cells: [percent(a.global_cap_saturation)] });
    }
    table(b, ['Share of budget used', 'Keys'], rows, empty);
  }

  function update(now) {
    const prev = previous;
    const seconds = prev ? (now.time_ms - prev.time_ms) / 1000 : 0;
    const m = now.metrics;
    const t = now.time_ms;

    const limits = {}, peaks = {};
    series(m, 'sluice_pool_limit').forEach(function (s) { limits[s.labels.pool] = s.value; });
    series(m, 'sluice_pool_peak').forEach(function (s) { peaks[s.labels.pool] = s.value; });
    series(m, 'sluice_pool_in_use').forEach(function (s) { push('pools', s.labels.pool, t, s.value); });
    const createBytes = first(m, 'sluice_create_bytes_in_use');
    const createBytesLimit = first(m, 'sluice_create_bytes_limit');
    timeline('pools', 'Slots in use', UNITS.slots, function (p) { return word('pool', p); }, t, {
      headers: ['Pool', 'In use', 'Limit', 'Peak'],
      extra: function (p) {
        return [p in limits ? count(limits[p]) : '\u2013', p in peaks ? count(peaks[p]) : '\u2013'];
      },
      rows: createBytes === undefined ? [] : [{ name: 'create bytes in flight',
        cells: [bytes(createBytes), createBytesLimit ? bytes(createBytesLimit) : '\u2013', '\u2013'] }],
    });

    const byStatus = {}, statusTotals = {};
    series(m, 'sluice_http_requests_total').forEach(function (s) {
      const st = s.labels.status;
      byStatus[st] = (byStatus[st] || 0) + rate(now, prev, s.key, seconds);
      statusTotals[st] = (statusTotals[st] || 0) + s.value;
    });
    const reasons = {}, reasonTotals = {};
    series(m, 'sluice_admission_rejections_total').forEach(function (s) {
      reasons[s.labels.reason] = rate(now, prev, s.key, seconds);
      reasonTotals[s.labels.reason] = s.value;
    });
    series(m, 'sluice_view_rung_total').forEach(function (s) {
      if (s.labels.rung !== 'plain' || !s.labels.reason) return;
      reasons['view_' + s.labels.reason] = rate(now, prev, s.key, seconds);
      reasonTotals['view_' + s.labels.reason] = s.value;
    });
    const latency = {}, calls = {};
    series(m, 'sluice_dependency_duration_seconds_count').forEach(function (s) {
      const id = (s.labels.dependency || '') + '/' + (s.labels.op || '');
      const n = rate(now, prev, s.key, seconds);
      const time = rate(now, prev, s.key.replace('_count', '_sum'), seconds);
      latency[id] = n > 0 ? 1000 * time / n : 0;
      calls[id] = s.value;
    });
    if (prev) {
      Object.keys(byStatus).forEach(function (st) { push('status', st, t, byStatus[st]); });
      Object.keys(reasons).forEach(function (r) { push('sheds', r, t, reasons[r]); });
      Object.keys(latency).forEach(function (id) { push('latency', id, t, latency[id]); });
    }
    timeline('status', 'Responses per second, by status', UNITS.rate,
      function (st) { return word('status', st); }, t, {
        hideZero: true, headers: ['Status', 'Now', 'Since start'],
        extra: function (st) { return [count(statusTotals[st] || 0)]; }, empty: 'no responses yet' });
    timeline('sheds', 'Refusals and sheds per second, by reason', UNITS.rate,
      function (r) { return word('reason', r); }, t, {
        hideZero: true, headers: ['Reason', 'Now', 'Since start'],
        extra: function (r) { return [count(reasonTotals[r] || 0)]; },
        rows: Object.keys(reasonTotals).filter(function (r) {
          return reasonTotals[r] > 0 && !(history.sheds && history.sheds[r] &&
            history.sheds[r].some(function (p) { return p.v > 0; }));
        }).sort().map(function (r) {
          return { name: word('reason', r), cells: ['0 per second', count(reasonTotals[r])] };
        }),
        empty: 'none since start' });
    const callName = function (id) {
      const parts = id.split('/');
      return word('dependency', parts[0]) + ': ' + word('op', parts[1]);
    };
    timeline('latency', 'Dependency latency (mean over each poll)', UNITS.ms, callName, t, {
      hideZero: true, headers: ['Call', 'Now', 'Calls since start'],
      extra: function (id) { return [count(calls[id] || 0)]; }, empty: 'no calls in the window' });

    const changes = {};
    series(m, 'sluice_breaker_transitions_total').forEach(function (s) {
      changes[s.labels.dependency] = (changes[s.labels.dependency] || 0) + s.value;
    });
    series(m, 'sluice_breaker_state').forEach(function (s) {
      push('breakers', s.labels.dependency, t, BREAKER_LEVEL[s.value] || 0);
    });
    timeline('breakers', 'Circuit breakers', UNITS.breaker, function (d) { return word('dependency', d); }, t, {
      headers: ['Dependency', 'State', 'Changes since start'],
      extra: function (d) { return [count(changes[d] || 0)]; },
      note: 'Closed: calls go through. Open: calls are refused at once. Half-open: a few trial calls.' });

    const arrivals = first(m, 'sluice_view_arrival_rate');
    const sustainable = first(m, 'sluice_view_sustainable_rate');
    if (arrivals !== undefined) push('ladder', 'arrivals', t, arrivals);
    if (sustainable !== undefined) push('ladder', 'sustainable', t, sustainable);
    const ladderRows = [];
    const shed = first(m, 'sluice_view_shed_percent');
    if (shed !== undefined) ladderRows.push({ name: 'views shown plain now', cells: [decimal(shed) + ' %'] });
    const service = first(m, 'sluice_view_service_seconds');
    if (service !== undefined) ladderRows.push({ name: 'time one render takes', cells: [duration(service)] });
    timeline('ladder', 'Highlighter: views needing a render against what it sustains', UNITS.rate,
      function (k) { return k === 'arrivals' ? 'views needing a render' : 'renders it sustains'; }, t,
      { rows: ladderRows });

    series(m, 'sluice_outbox_age_seconds').forEach(function (s) { push('outbox', 'age', t, s.value); });
    const outboxRows = [];
    const done = first(m, 'sluice_outbox_done_total');
    if (done !== undefined) outboxRows.push({ name: 'jobs done since start', cells: [count(done)] });
    const retries = first(m, 'sluice_outbox_retries_total');
    if (retries !== undefined) outboxRows.push({ name: 'retries since start', cells: [count(retries)] });
    timeline('outbox', 'Outbox: age of the oldest job', UNITS.seconds, function () { return 'oldest job'; }, t,
      { rows: outboxRows, note: 'Deletes and purges still owed to the stores and the edge.' });

    storagePanel(m, t);
    reportsPanel(now, t);
    abusePanels(now);

    const failOpen = first(m, 'sluice_limiter_fail_open');
    const lb = body(panel('limiter', 'Limiter'));
    if (failOpen === undefined) {
      lb.appendChild(el('p', {}, 'In-process token buckets; no shared limiter store, so nothing can fail open here.'));
    } else {
      lb.appendChild(el('p', {}, failOpen > 0
        ? 'The shared limiter store is not answering: per-visitor create limits are open and the global caps run on this process\u2019s share.'
        : 'The shared limiter store is answering.'));
    }

    const stamp = document.getElementById('updated');
    if (stamp) stamp.textContent = new Date(t).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
    previous = now;
  }
  function poll() {
    fetch('/api/v1/status', { cache: 'no-store' })
      .then(function (r) { return r.json(); })
      .then(update)
      // A missed poll leaves the panels as they were; the next one catches up.
      .catch(function (e) { console.error('sluice status:', e); })
      .finally(function () { setTimeout(poll, POLL_MS); });
  }
  poll();
})();
)js";

constexpr std::string_view kCryptJs =
    R"js(// sluice: end-to-end encrypted pastes in the browser (docs/encryption.md, envelope version 1).
// The key is made here and travels only in the link's fragment (after '#'), which a browser never
// sends to a server; the server stores and serves the envelope and cannot open it. Text reaches
// the page through textContent only.
'use strict';
(function () {
  const ALG = 'A256GCM', KDF = 'PBKDF2-SHA256', ITER = 600000;
  const MIN_ITER = 100000, MAX_ITER = 2000000, IV_BYTES = 12, SALT_BYTES = 16, KEY_BYTES = 32;
  const TAG_BYTES = 16;
  const utf8 = new TextEncoder();

  class CryptError extends Error {
    constructor(code, message) { super(message); this.code = code; }
  }

  // ---- base64url, canonical and unpadded (RFC 4648, section 5) ----
  function b64u(bytes) {
    let s = '';
    for (let i = 0; i < bytes.length; i += 0x8000) {
      s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }
  function unb64u(text, field) {
    const bad = new CryptError('bad_envelope', "'" + field + "' is not canonical unpadded base64url");
    if (typeof text !== 'string' || !/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) throw bad;
    const bin = atob(text.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((text.length + 3) % 4));
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    if (b64u(out) !== text) throw bad;  // non-zero trailing bits: another spelling of the bytes
    return out;
  }
  function concat(a, b) {
    const out = new Uint8Array(a.length + b.length);
    out.set(a, 0);
    out.set(b, a.length);
    return out;
  }

  // ---- the envelope ----
  // The same checks as the server's (src/service/envelope.cc), so a damaged envelope is named as
  // such rather than failing somewhere inside WebCrypto.
  function parseEnvelope(text) {
    let e;
    try { e = JSON.parse(text); } catch (x) { throw new CryptError('bad_envelope', 'the envelope is not JSON'); }
    const want = ['alg', 'ct', 'iv', 'kdf', 'v', 'z'];
    if (!e || typeof e !== 'object' || Array.isArray(e) || Object.keys(e).sort().join() !== want.join()) {
      throw new CryptError('bad_envelope', 'the envelope needs exactly the fields v, alg, iv, z, kdf and ct');
    }
    if (e.v !== 1) throw new CryptError('bad_envelope', 'unknown envelope version ' + String(e.v).slice(0, 20));
    if (e.alg !== ALG) throw new CryptError('bad_envelope', "'alg' must be A256GCM");
    if (e.z !== 'none' && e.z !== 'deflate-raw') throw new CryptError('bad_envelope', "'z' must be none or deflate-raw");
    const iv = unb64u(e.iv, 'iv');
    if (iv.length !== IV_BYTES) throw new CryptError('bad_envelope', "'iv' must be 12 bytes");
    const ct = unb64u(e.ct, 'ct');
    if (ct.length < TAG_BYTES) throw new CryptError('bad_envelope', "'ct' is shorter than the tag");
    let kdf = null;
    if (e.kdf !== null) {
      const k = e.kdf;
      if (!k || typeof k !== 'object' || Array.isArray(k) || Object.keys(k).sort().join() !== 'iter,name,salt') {
        throw new CryptError('bad_envelope', "'kdf' needs exactly name, iter and salt");
      }
      if (k.name !== KDF) throw new CryptError('bad_envelope', "'kdf.name' must be PBKDF2-SHA256");
      if (!Number.isInteger(k.iter) || k.iter < MIN_ITER || k.iter > MAX_ITER) {
        throw new CryptError('bad_envelope', "'kdf.iter' must be within [100000, 2000000]");
      }
      const salt = unb64u(k.salt, 'kdf.salt');
      if (salt.length !== SALT_BYTES) throw new CryptError('bad_envelope', "'kdf.salt' must be 16 bytes");
      kdf = { iter: k.iter, salt: salt };
    }
    return { iv: iv, z: e.z, kdf: kdf, ct: ct };
  }
  // The authenticated data: the canonical header, so no field can be swapped without failing the tag.
  function aad(e) {
    const kdf = e.kdf ? '{"name":"' + KDF + '","iter":' + e.kdf.iter + ',"salt":"' + b64u(e.kdf.salt) + '"}' : 'null';
    return '{"v":1,"alg":"' + ALG + '","iv":"' + b64u(e.iv) + '","z":"' + e.z + '","kdf":' + kdf + '}';
  }
  function serialize(e) {
    return aad(e).slice(0, -1) + ',"ct":"' + b64u(e.ct) + '"}';
  }

  async function aesKey(linkKey, kdf, password, usage) {
    if (!kdf) return crypto.subtle.importKey('raw', linkKey, 'AES-GCM', false, [usage]);
    const base = await crypto.subtle.importKey('raw', concat(linkKey, utf8.encode(password)), 'PBKDF2', false, ['deriveKey']);
    return crypto.subtle.deriveKey({ name: 'PBKDF2', hash: 'SHA-256', salt: kdf.salt, iterations: kdf.iter },
      base, { name: 'AES-GCM', length: 256 }, false, [usage]);
  }

  function canDeflate() {
    try { new CompressionStream('deflate-raw'); new DecompressionStream('deflate-raw'); return true; } catch (x) { return false; }
  }
  async function deflate(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream('deflate-raw'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  // Inflation stops past `cap`: a small envelope must not inflate to gigabytes (a zip bomb).
  async function inflate(bytes, cap) {
    if (!canDeflate()) throw new CryptError('unsupported', 'this browser cannot decompress this paste (no DecompressionStream("deflate-raw")); use a current browser or sluice get');
    const reader = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate-raw')).getReader();
    const parts = [];
    let total = 0;
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        total += r.value.length;
        if (total > cap) {
          reader.cancel().catch(function () {});
          throw new CryptError('too_large', 'the text inflates past ' + cap + ' bytes; not opened');
        }
        parts.push(r.value);
      }
    } catch (x) {
      if (x instanceof CryptError) throw x;
      throw new CryptError('damaged', 'the compressed text is damaged');
    }
    const out = new Uint8Array(total);
    let at = 0;
    for (const p of parts) { out.set(p, at); at += p.length; }
    return out;
  }

  // Seals `bytes` (a Uint8Array); returns { envelope, key } with the key as the link's fragment.
  // `fixed` ({ key, iv, salt, iter, compress }) is for the published vectors only.
  async function seal(bytes, password, fixed) {
    fixed = fixed || {};
    const linkKey = fixed.key || crypto.getRandomValues(new Uint8Array(KEY_BYTES));
    const e = { iv: fixed.iv || crypto.getRandomValues(new Uint8Array(IV_BYTES)), z: 'none', kdf: null };
    if (password) {
      e.kdf = { iter: fixed.iter || ITER, salt: fixed.salt || crypto.getRandomValues(new Uint8Array(SALT_BYTES)) };
    }
    let clear = bytes;
    if (fixed.compress !== false && bytes.length > 0 && canDeflate()) {
      const d = await deflate(bytes);
      if (d.length < bytes.length) { clear = d; e.z = 'deflate-raw'; }
    }
    const key = await aesKey(linkKey, e.kdf, password, 'encrypt');
    e.ct = new Uint8Array(await crypto.subtle.encrypt(
      { name: 'AES-GCM', iv: e.iv, additionalData: utf8.encode(aad(e)), tagLength: 128 }, key, clear));
    return { envelope: serialize(e), key: b64u(linkKey) };
  }

  // Opens an envelope with the link's key (and password); returns the plaintext bytes.
  async function open(envelopeText, keyText, password, cap) {
    let linkKey;
    try { linkKey = unb64u(keyText, 'key'); } catch (x) { linkKey = null; }
    if (!linkKey || linkKey.length !== KEY_BYTES) {
      throw new CryptError('bad_key', "the link's key (the part after #) is damaged: copy the whole link");
    }
    const e = parseEnvelope(envelopeText);
    if (e.kdf && (password === null || password === undefined)) {
      throw new CryptError('password_required', 'this paste is protected by a password');
    }
    const key = await aesKey(linkKey, e.kdf, password, 'decrypt');
    let clear;
    try {
      clear = new Uint8Array(await crypto.subtle.decrypt(
        { name: 'AES-GCM', iv: e.iv, additionalData: utf8.encode(aad(e)), tagLength: 128 }, key, e.ct));
    } catch (x) {
      throw new CryptError('wrong_key', e.kdf
        ? "Wrong password, or the link's key is not this paste's (the link may be cut short or altered)."
        : "The link's key does not open this paste: the link may be cut short or altered, or the paste is damaged.");
    }
    if (e.z === 'none') {
      if (clear.length > cap) throw new CryptError('too_large', 'the text is over ' + cap + ' bytes; not opened');
      return clear;
    }
    return inflate(clear, cap);
  }

  window.sluiceCrypt = { seal: seal, open: open, parseEnvelope: parseEnvelope, b64u: b64u, unb64u: unb64u, CryptError: CryptError };

  function show(el, on) { if (el) el.hidden = !on; }
  function say(el, text, warn) {
    if (!el) return;
    el.textContent = text;
    el.classList.toggle('warn', !!warn);
    el.hidden = false;
  }
  async function errorText(r) {
    try { const j = await r.json(); if (j && j.error) return j.error + ' (HTTP ' + r.status + ')'; } catch (x) { /* not JSON */ }
    return 'HTTP ' + r.status;
  }

  // ---- the create page: "Encrypt in this browser" ----
  const form = document.getElementById('create');
  const encrypt = document.getElementById('encrypt');
  if (form && encrypt) {
    const area = form.querySelector('textarea');
    const password = document.getElementById('create-password');
    const problem = document.getElementById('create-problem');
    const hint = document.getElementById('encrypt-hint');
    const sync = function () {
      password.disabled = !encrypt.checked;
      show(hint, encrypt.checked);
      // Without a name the text cannot leave in a plain form submission: if anything submits the
      // form past this script, the server answers "no content" instead of storing plaintext.
      if (encrypt.checked) area.removeAttribute('name'); else area.setAttribute('name', 'content');
    };
    encrypt.addEventListener('change', sync);
    sync();
    form.addEventListener('submit', async function (ev) {
      if (!encrypt.checked) return;
      ev.preventDefault();
      show(problem, false);
      const max = Number(form.getAttribute('data-max-bytes')) || 1000000;
      const bytes = utf8.encode(area.value);
      if (bytes.length === 0) { say(problem, 'The paste is empty.', true); return; }
      if (bytes.length > max) { say(problem, 'The paste is ' + bytes.length + ' bytes; this server keeps at most ' + max + '.', true); return; }
      const button = form.querySelector('button[type=submit]');
      button.disabled = true;
      try {
        const t0 = performance.now();
        const sealed = await seal(bytes, password.value ? password.value : null);
        form.setAttribute('data-encrypt-ms', String(Math.round(performance.now() - t0)));
        const body = { content: sealed.envelope, encrypted: true, ttl: form.elements.ttl.value };
        if (form.elements.burn.checked) body.burn = true;
        const r = await fetch('/api/v1/pastes', { method: 'POST', headers: { 'Content-Type': 'application/json', 'Accept': 'application/json' }, body: JSON.stringify(body), credentials: 'omit' });
        if (r.status !== 201) { say(problem, 'Not created: ' + await errorText(r), true); return; }
        const j = await r.json();
        created(j, sealed.key, !!body.burn, !!password.value);
      } catch (x) {
        say(problem, 'Not created: ' + (x && x.message ? x.message : String(x)), true);
      } finally {
        button.disabled = false;
      }
    });
  }

  function linkRow(id, value, label) {
    const row = document.createElement('div');
    row.className = 'linkrow';
    const input = document.createElement('input');
    input.id = id; input.readOnly = true; input.value = value; input.setAttribute('aria-label', label);
    row.appendChild(input);
    const copy = document.createElement('button');
    copy.type = 'button'; copy.textContent = 'Copy';
    copy.setAttribute('aria-label', 'Copy: ' + label);
    copy.addEventListener('click', function () {
      input.select();
      const done = function () { copy.textContent = 'Copied'; setTimeout(function () { copy.textContent = 'Copy'; }, 1500); };
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(value).then(done, function () {});
      else { try { document.execCommand('copy'); done(); } catch (x) { /* the link stays selected */ } }
    });
    row.appendChild(copy);
    return row;
  }
  function created(j, key, burn, withPassword) {
    const link = j.url + '#' + key;
    const remove = new URL('/delete/' + j.id + '?token=' + encodeURIComponent(j.delete_token), j.url).href;
    const box = document.createElement('section');
    box.className = 'notice'; box.id = 'created';
    const h = document.createElement('h1');
    h.textContent = burn ? 'Encrypted paste created: burns after reading' : 'Encrypted paste created';
    box.appendChild(h);
    const p = document.createElement('p');
    p.textContent = 'Share this whole link: the key after # opens it, and the server never had it.' +
      (withPassword ? ' Send the password another way.' : '') + (burn ? ' Opening it yourself burns it.' : '');
    box.appendChild(p);
    box.appendChild(linkRow('share-link', link, 'Link to this paste, with its key'));
    const d = document.createElement('p');
    d.textContent = 'Delete link, shown only this once:';
    box.appendChild(d);
    box.appendChild(linkRow('delete-link', remove, 'Delete link'));
    if (!burn) {
      const a = document.createElement('a');
      a.className = 'button'; a.id = 'open-created'; a.href = link; a.textContent = 'Open it';
      box.appendChild(a);
    }
    form.hidden = true;
    form.reset();
    form.parentNode.insertBefore(box, form);
  }

  // ---- the page of an encrypted paste ----
  const root = document.getElementById('encrypted');
  if (!root) return;
  const status = document.getElementById('crypt-status');
  const unlock = document.getElementById('unlock');
  const pw = document.getElementById('paste-password');
  const cap = Number(root.getAttribute('data-max-bytes')) || 1000000;
  const key = location.hash.slice(1);
  let envelope = null;

  function render(bytes, ms) {
    root.setAttribute('data-decrypt-ms', String(Math.round(ms)));
    // ignoreBOM keeps a leading U+FEFF as text: the paste is shown as its bytes say.
    const text = new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes);
    const code = document.getElementById('code');
    const lines = text.split('\n');
    if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
    const frag = document.createDocumentFragment();
    for (const line of lines) {
      const span = document.createElement('span');
      span.className = 'l';
      span.textContent = line.endsWith('\r') ? line.slice(0, -1) : line;
      frag.appendChild(span);
      frag.appendChild(document.createTextNode('\n'));
    }
    code.textContent = '';
    code.appendChild(frag);
    code.hidden = false;
    const download = document.getElementById('download');
    download.href = URL.createObjectURL(new Blob([bytes], { type: 'text/plain;charset=utf-8' }));
    document.getElementById('decrypted-meta').textContent = 'Decrypted in this browser: ' + bytes.length + ' bytes';
    const copy = document.getElementById('copy');
    copy.addEventListener('click', function () {
      const done = function () { copy.textContent = 'Copied'; setTimeout(function () { copy.textContent = 'Copy'; }, 1500); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { copy.textContent = 'Copy failed'; });
      } else {
        const t = document.createElement('textarea');
        t.value = text; t.style.position = 'fixed'; t.style.opacity = '0';
        document.body.appendChild(t); t.select();
        try { document.execCommand('copy'); done(); } catch (x) { copy.textContent = 'Copy failed'; }
        t.remove();
      }
    });
    show(document.getElementById('decrypted-tools'), true);
    show(unlock, false);
    show(status, false);
    root.setAttribute('data-state', 'decrypted');
  }
  function fail(message) {
    say(status, message, true);
    root.setAttribute('data-state', 'failed');
  }
  async function attempt(password) {
    const t0 = performance.now();
    try {
      render(await open(envelope, key, password, cap), performance.now() - t0);
    } catch (x) {
      if (x instanceof CryptError && x.code === 'password_required') {
        say(status, 'Enter the password to decrypt this paste.', false);
        show(unlock, true);
        root.setAttribute('data-state', 'password');
        pw.focus();
        return;
      }
      if (x instanceof CryptError && x.code === 'wrong_key' && password !== null) {
        say(status, x.message, true);
        show(unlock, true);
        root.setAttribute('data-state', 'wrong-password');
        pw.select();
        return;
      }
      fail(x instanceof CryptError ? 'Cannot decrypt this paste: ' + x.message : 'Cannot decrypt this paste: ' + (x && x.message ? x.message : String(x)));
    }
  }
  async function fetchEnvelope(url, method) {
    const r = await fetch(url, { method: method, headers: { 'Accept': 'application/json' }, credentials: 'omit', cache: 'no-store' });
    if (r.status !== 200) throw new Error(await errorText(r));
    return r.text();
  }
  async function start(url, method) {
    say(status, 'Decrypting in this browser\u2026', false);
    try {
      envelope = await fetchEnvelope(url, method);
    } catch (x) {
      fail('Cannot fetch this paste: ' + x.message);
      return;
    }
    await attempt(null);
  }
  unlock.addEventListener('submit', function (ev) {
    ev.preventDefault();
    attempt(pw.value);
  });
  if (!key) {
    fail('This link has no key (the part after #), so the paste cannot be decrypted. Ask whoever shared it for the whole link.');
    return;
  }
  if (!window.crypto || !crypto.subtle) {
    fail('This browser has no WebCrypto here (it needs a secure context: https or localhost), so the paste cannot be decrypted.');
    return;
  }
  if (root.getAttribute('data-burn') === '1') {
    show(status, false);
    const confirm = document.getElementById('burn-confirm');
    show(confirm, true);
    document.getElementById('confirm-burn').addEventListener('click', function () {
      show(confirm, false);
      start(root.getAttribute('data-claim'), 'POST');
    });
    return;
  }
  start(root.getAttribute('data-raw'), 'GET');
})();
)js";

uint64_t Fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// "sha256-<base64>", the Subresource Integrity of `body` (W3C SRI, section 3.1).
std::string Integrity(std::string_view body) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(body.data()), body.size(), digest);
  unsigned char encoded[4 * ((SHA256_DIGEST_LENGTH + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(encoded, digest, SHA256_DIGEST_LENGTH);
  return "sha256-" + std::string(reinterpret_cast<const char*>(encoded), static_cast<size_t>(n));
}

Asset MakeAsset(std::string_view path, std::string_view type, std::string_view body) {
  const std::string hash = fmt::format("{:016x}", Fnv1a(body));
  return Asset{path,
               type,
               body,
               "\"" + hash + "\"",
               std::string(path) + "?v=" + hash.substr(0, 10),
               Integrity(body)};
}

const std::array<Asset, 4>& Assets() {
  static const std::array<Asset, 4> assets = {
      MakeAsset("/static/style.css", "text/css; charset=utf-8", kStyle),
      MakeAsset("/static/app.js", "text/javascript; charset=utf-8", kAppJs),
      MakeAsset("/static/status.js", "text/javascript; charset=utf-8", kStatusJs),
      MakeAsset("/static/crypt.js", "text/javascript; charset=utf-8", kCryptJs),
  };
  return assets;
}

}  // namespace

const Asset* FindAsset(std::string_view path) {
  path = path.substr(0, path.find('?'));
  for (const Asset& asset : Assets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

const std::string& AssetUrl(std::string_view path) {
  const Asset* asset = FindAsset(path);
  if (asset == nullptr) throw std::logic_error("no such asset");
  return asset->versioned_path;
}

}  // namespace sluice::http
