#include "assets.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <stdexcept>

namespace sluice::http {
namespace {

constexpr std::string_view kStyle = R"css(
:root { color-scheme: light dark; --fg: #1f2328; --bg: #ffffff; --panel: #f6f8fa; --muted: #59636e;
  --line: #d1d9e0; --accent: #0969da; --warn-bg: #fff8c5; --warn-line: #d4a72c; --ok-bg: #dafbe1;
  --ok-line: #4ac26b; --num: #8c959f;
  --kw: #cf222e; --ty: #8250df; --str: #0a3069; --com: #59636e; --numc: #0550ae; --pre: #953800;
  --fn: #6639ba; --sym: #1f2328; --var: #953800; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --bg: #0d1117; --panel: #161b22; --muted: #9198a1; --line: #3d444d;
    --accent: #4493f8; --warn-bg: #2e2a1a; --warn-line: #9e6a03; --ok-bg: #12261e; --ok-line: #2ea043;
    --num: #6e7681;
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
  user-select: none; -webkit-user-select: none; }
.hl-keyword { color: var(--kw); } .hl-type, .hl-classname, .hl-usertype { color: var(--ty); }
.hl-string, .hl-regexp, .hl-value { color: var(--str); }
.hl-comment, .hl-todo { color: var(--com); font-style: italic; }
.hl-number { color: var(--numc); } .hl-preproc, .hl-label { color: var(--pre); }
.hl-function, .hl-predef_func { color: var(--fn); } .hl-symbol, .hl-cbracket { color: var(--sym); }
.hl-variable, .hl-predef_var, .hl-attribute, .hl-property { color: var(--var); }
.hl-specialchar { color: var(--numc); } .hl-url { color: var(--accent); text-decoration: underline; }
.rung { font-size: .8rem; border: 1px solid var(--line); border-radius: 1rem; padding: 0 .5rem; }
table { border-collapse: collapse; width: 100%; font-size: .92rem; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); }
td code { font-size: .8rem; overflow-wrap: anywhere; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(21rem, 1fr)); gap: 1rem; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .75rem 1rem; background: var(--panel); }
.card h2 { font-size: 1rem; margin: 0 0 .5rem; }
.chart { width: 100%; height: 70px; display: block; }
.chart polyline { fill: none; stroke-width: 1.5; vector-effect: non-scaling-stroke; }
.legend { font-size: .8rem; color: var(--muted); display: flex; flex-wrap: wrap; gap: .25rem .75rem; }
.legend i { display: inline-block; width: .7rem; height: .7rem; border-radius: 2px; margin-right: .25rem; }
.js-only[hidden] { display: none !important; }
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
  const form = document.getElementById('create');
  if (form) {
    const area = form.querySelector('textarea');
    area.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        if (form.reportValidity()) form.submit();
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
    R"js(// sluice /status: polls /api/v1/status (the numbers /metrics shows) and draws small charts.
'use strict';
(function () {
  const root = document.getElementById('live');
  if (!root) return;
  const POLL_MS = 2000, KEEP = 60;
  const COLORS = ['#0969da', '#cf222e', '#1a7f37', '#8250df', '#bf8700', '#e16f24', '#57606a', '#1b7c83'];
  let previous = null;
  const history = {};

  function parse(key) {
    const brace = key.indexOf('{');
    const name = brace < 0 ? key : key.slice(0, brace);
    const labels = {};
    if (brace >= 0) {
      const re = /(\w+)="((?:[^"\\]|\\.)*)"/g;
      let m;
      while ((m = re.exec(key.slice(brace))) !== null) labels[m[1]] = m[2];
    }
    return { name: name, labels: labels };
  }
  function series(metrics, name) {
    const out = [];
    for (const key in metrics) {
      const p = parse(key);
      if (p.name === name) out.push({ labels: p.labels, value: metrics[key], key: key });
    }
    return out;
  }
  function push(id, label, value) {
    const h = history[id] || (history[id] = {});
    const s = h[label] || (h[label] = []);
    s.push(value);
    while (s.length > KEEP) s.shift();
  }
  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return '–';
    if (Math.abs(v) >= 100) return v.toFixed(0);
    if (Math.abs(v) >= 10) return v.toFixed(1);
    return v.toFixed(2);
  }
  function card(id, title) {
    let el = document.getElementById('card-' + id);
    if (el) return el;
    el = document.createElement('section');
    el.className = 'card';
    el.id = 'card-' + id;
    const h = document.createElement('h2');
    h.textContent = title;
    el.appendChild(h);
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('class', 'chart');
    svg.setAttribute('viewBox', '0 0 ' + (KEEP - 1) + ' 100');
    svg.setAttribute('preserveAspectRatio', 'none');
    el.appendChild(svg);
    const legend = document.createElement('div');
    legend.className = 'legend';
    el.appendChild(legend);
    root.appendChild(el);
    return el;
  }
  function draw(id, title, unit, hideZero) {
    const el = card(id, title);
    const svg = el.querySelector('svg');
    const legend = el.querySelector('.legend');
    const h = history[id] || {};
    // Series that never left zero add only noise (most rejection reasons, most of the time).
    const labels = Object.keys(h).sort().filter(function (l) {
      return !hideZero || h[l].some(function (v) { return v > 0; });
    });
    let width = 9;
    labels.forEach(function (l) { width = Math.max(width, h[l].length - 1); });
    svg.setAttribute('viewBox', '0 0 ' + width + ' 100');
    let max = 0;
    labels.forEach(function (l) { h[l].forEach(function (v) { if (v > max) max = v; }); });
    if (max <= 0) max = 1;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    legend.textContent = labels.length ? '' : 'none so far';
    labels.forEach(function (l, i) {
      const color = COLORS[i % COLORS.length];
      const values = h[l];
      const offset = width + 1 - values.length;
      const points = values.map(function (v, j) {
        return (offset + j) + ',' + (100 - (v / max) * 96 - 2).toFixed(2);
      }).join(' ');
      const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
      line.setAttribute('points', points);
      line.setAttribute('stroke', color);
      svg.appendChild(line);
      const item = document.createElement('span');
      const swatch = document.createElement('i');
      swatch.style.background = color;
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(l + ': ' + fmt(values[values.length - 1]) + unit));
      item.setAttribute('data-series', l);
      legend.appendChild(item);
    });
  }
  function rate(now, prev, key, seconds) {
    if (!prev || !(key in prev.metrics) || seconds <= 0) return 0;
    return Math.max(0, (now.metrics[key] - prev.metrics[key]) / seconds);
  }
  function update(now) {
    const prev = previous;
    const seconds = prev ? (now.time_ms - prev.time_ms) / 1000 : 0;
    const m = now.metrics;
    series(m, 'sluice_pool_in_use').forEach(function (s) {
      push('pools', s.labels.pool, s.value);
    });
    draw('pools', 'Slots in use per pool', '');
    if (prev) {
      series(m, 'sluice_admission_rejections_total').forEach(function (s) {
        push('sheds', s.labels.reason, rate(now, prev, s.key, seconds));
      });
      series(m, 'sluice_view_rung_total').forEach(function (s) {
        if (s.labels.rung === 'plain' && s.labels.reason) push('sheds', 'view_' + s.labels.reason, rate(now, prev, s.key, seconds));
      });
      draw('sheds', 'Sheds and 429/503 rejections per second, by reason', '/s', true);
      const byStatus = {};
      series(m, 'sluice_http_requests_total').forEach(function (s) {
        const st = s.labels.status;
        if (st === '429' || st === '503' || st === '200' || st === '201') {
          byStatus[st] = (byStatus[st] || 0) + rate(now, prev, s.key, seconds);
        }
      });
      Object.keys(byStatus).forEach(function (st) { push('status', st, byStatus[st]); });
      draw('status', 'Responses per second by status', '/s');
      series(m, 'sluice_dependency_duration_seconds_count').forEach(function (s) {
        const sumKey = s.key.replace('_count', '_sum');
        const calls = rate(now, prev, s.key, seconds);
        const time = rate(now, prev, sumKey, seconds);
        const label = Object.values(s.labels).join(' ');
        push('latency', label, calls > 0 ? 1000 * time / calls : 0);
      });
      draw('latency', 'Dependency latency (mean over the poll, ms)', ' ms', true);
    }
    const views = {};
    series(m, 'sluice_view_arrival_rate').forEach(function (s) { views['arrivals/s'] = s.value; });
    series(m, 'sluice_view_sustainable_rate').forEach(function (s) { views['sustainable/s'] = s.value; });
    series(m, 'sluice_view_shed_percent').forEach(function (s) { views['shed %'] = s.value; });
    Object.keys(views).forEach(function (k) { push('ladder', k, views[k]); });
    draw('ladder', 'Highlighter ladder', '');
    series(m, 'sluice_breaker_state').forEach(function (s) {
      push('breakers', Object.values(s.labels).join(' '), s.value);
    });
    draw('breakers', 'Breaker state (0 closed, 1 open, 2 half-open)', '');
    series(m, 'sluice_outbox_age_seconds').forEach(function (s) { push('outbox', 'age', s.value); });
    draw('outbox', 'Outbox age', ' s');
    document.querySelectorAll('[data-metric]').forEach(function (cell) {
      const key = cell.getAttribute('data-metric');
      if (key in m) cell.textContent = fmt(m[key]);
    });
    const stamp = document.getElementById('updated');
    if (stamp) stamp.textContent = new Date(now.time_ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
    previous = now;
  }
  function poll() {
    fetch('/api/v1/status', { cache: 'no-store' })
      .then(function (r) { return r.json(); })
      .then(update)
      .catch(function () {})
      .finally(function () { setTimeout(poll, POLL_MS); });
  }
  poll();
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

Asset MakeAsset(std::string_view path, std::string_view type, std::string_view body) {
  const std::string hash = fmt::format("{:016x}", Fnv1a(body));
  return Asset{path, type, body, "\"" + hash + "\"",
               std::string(path) + "?v=" + hash.substr(0, 10)};
}

const std::array<Asset, 3>& Assets() {
  static const std::array<Asset, 3> assets = {
      MakeAsset("/static/style.css", "text/css; charset=utf-8", kStyle),
      MakeAsset("/static/app.js", "text/javascript; charset=utf-8", kAppJs),
      MakeAsset("/static/status.js", "text/javascript; charset=utf-8", kStatusJs),
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
