// sluice /status: polls /api/v1/status (the registry /metrics renders) every 2 s and draws each
// panel: a chart of the last 5 minutes with its unit and time axis, and the values now, in words.
'use strict';
(function () {
  const root = document.getElementById('live');
  if (!root) return;
  const POLL_MS = 2000,
    WINDOW_MIN = 5,
    WINDOW_MS = WINDOW_MIN * 60000;
  const SVG = 'http://www.w3.org/2000/svg';
  // The page's messages in its language: a JSON data block the server puts in the page
  // (src/http/pages.cc, docs/translations.md); without one, the English msgids themselves.
  const messages = (function () {
    const block = document.getElementById('i18n-status');
    try {
      return block ? JSON.parse(block.textContent) : {};
    } catch {
      return {};
    }
  })();
  function t(msgid, values) {
    const text = Object.prototype.hasOwnProperty.call(messages, msgid) ? messages[msgid] : msgid;
    return text.replace(/\{([a-z_]+)\}/g, function (whole, name) {
      return values && name in values ? String(values[name]) : whole;
    });
  }
  // Numbers are written as the page's language writes them (1.234,5 in German, 1 234,5 in
  // French), as the server writes sizes (src/http/pages.cc's Decimal).
  const LANG = document.documentElement.lang || 'en';
  // `digits` decimals at most, `fixed` at least (a size keeps its ".0", as it did in English).
  function number(v, digits, fixed) {
    const format = { maximumFractionDigits: digits, minimumFractionDigits: fixed || 0 };
    try {
      return v.toLocaleString(LANG, format);
    } catch {
      // A tag this browser's Intl does not know (RangeError): English's digits are still numbers.
      return v.toLocaleString('en-US', format);
    }
  }
  const COLORS = [
    '#0969da',
    '#cf222e',
    '#1a7f37',
    '#8250df',
    '#bf8700',
    '#e16f24',
    '#1b7c83',
    '#6e7781',
  ];

  // The one table that turns /metrics' names and label values into words. A value missing here is
  // shown with its underscores as spaces, so a reason added later still reads as words.
  const WORDS = {
    pool: {
      create: t('create slots'),
      read: t('read slots'),
      fill: t('cache-fill slots'),
      highlight: t('highlighter slots'),
      view: t('view slots'),
    },
    reason: {
      ip_create_count: t('creates from one visitor (429)'),
      ip_create_bytes: t('bytes from one visitor (429)'),
      global_count: t('creates from everyone (429)'),
      global_bytes: t('bytes from everyone (429)'),
      origin_get_ip: t('reads from one visitor (429)'),
      create_slots: t('create slots full (503)'),
      create_slots_per_client: t("one visitor's create slots full (503)"),
      create_bytes: t('create bytes full (503)'),
      read_slots: t('read slots full (503)'),
      fill_cap: t('cache-fill slots full (503)'),
      connections: t('connections full (503)'),
      connections_per_client: t("one visitor's connections full (503)"),
      view_shed_for_load: t('views shown plain: highlighter busy'),
      view_render_failed: t('views shown plain: render failed'),
      view_render_timeout: t('views shown plain: render too slow'),
    },
    status: {
      200: t('200 OK'),
      201: t('201 created'),
      204: t('204 deleted'),
      304: t('304 not modified'),
      400: t('400 bad request'),
      401: t('401 no token'),
      404: t('404 not found'),
      405: t('405 wrong method'),
      408: t('408 too slow'),
      411: t('411 no length'),
      413: t('413 too large'),
      429: t('429 rate limit'),
      451: t('451 withheld'),
      500: t('500 server error'),
      503: t('503 overloaded'),
      504: t('504 timed out'),
      507: t('507 storage full'),
    },
    dependency: { meta: t('metadata store'), blob: t('body store'), redis: t('shared cache') },
    // sluice_breaker_state's numbers, as src/service/dependency.cc exports them.
    breaker: { 0: t('closed'), 1: t('open'), 2: t('half-open') },
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
    return number(a >= 100 ? Math.round(v) : Number(v.toFixed(a >= 10 ? 1 : 2)), 2);
  }
  function count(v) {
    return number(Math.round(v), 0);
  }
  function bytes(v) {
    if (v < 1000) return t('{n} bytes', { n: count(v) });
    const units = [t('{n} KB'), t('{n} MB'), t('{n} GB'), t('{n} TB')];
    let i = -1;
    do {
      v /= 1000;
      i += 1;
    } while (v >= 1000 && i < units.length - 1);
    const digits = v >= 100 ? 0 : 1;
    return units[i].replace('{n}', number(Number(v.toFixed(digits)), digits, digits));
  }
  function duration(seconds) {
    if (seconds < 1) return t('{n} ms', { n: decimal(seconds * 1000) });
    if (seconds < 60) return t('{n} s', { n: decimal(seconds) });
    const both = function (larger, smaller) {
      return t('{larger} {smaller}', { larger: larger, smaller: smaller });
    };
    const s = Math.round(seconds);
    if (s < 3600) {
      const m = t('{n} min', { n: Math.floor(s / 60) });
      return s % 60 ? both(m, t('{n} s', { n: s % 60 })) : m;
    }
    const h = t('{n} h', { n: Math.floor(s / 3600) });
    const min = Math.floor((s % 3600) / 60);
    return min ? both(h, t('{n} min', { n: min })) : h;
  }
  function percent(share) {
    return t('{n} %', { n: decimal(100 * share) });
  }

  // How each chart's unit is named on its axis and written in its table.
  const UNITS = {
    slots: { axis: t('slots'), integer: true, tick: count, value: count },
    rate: {
      axis: t('per second'),
      tick: decimal,
      value: function (v) {
        return t('{n} per second', { n: decimal(v) });
      },
    },
    ms: {
      axis: t('ms'),
      tick: decimal,
      value: function (v) {
        return t('{n} ms', { n: decimal(v) });
      },
    },
    seconds: { axis: t('seconds'), tick: decimal, value: duration },
    bytes: { axis: t('bytes'), integer: true, tick: bytes, value: bytes },
    reports: { axis: t('reports'), integer: true, tick: count, value: count },
    breaker: {
      axis: t('state'),
      step: true,
      levels: 3,
      tick: function (level) {
        return word('breaker', BREAKER_BY_LEVEL[level]);
      },
      value: function (level) {
        return word('breaker', BREAKER_BY_LEVEL[level]);
      },
    },
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
  function push(chart, id, nowMs, value) {
    const h = history[chart] || (history[chart] = {});
    const s = h[id] || (h[id] = []);
    s.push({ t: nowMs, v: value });
    while (s.length && s[0].t < nowMs - WINDOW_MS - POLL_MS) s.shift();
  }
  function rate(now, prev, key, seconds) {
    if (!prev || !(key in prev.metrics) || seconds <= 0) return 0;
    return Math.max(0, (now.metrics[key] - prev.metrics[key]) / seconds);
  }

  function el(tag, attrs, text) {
    const e =
      tag === 'svg' || tag === 'line' || tag === 'polyline' || tag === 'text' || tag === 'rect'
        ? document.createElementNS(SVG, tag)
        : document.createElement(tag);
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
      if (card) card.replaceWith(fresh);
      else root.appendChild(fresh);
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
  function chart(parent, title, unit, lines, nowMs) {
    const width = Math.max(240, Math.round(parent.getBoundingClientRect().width) || 320);
    const height = 132,
      left = 58,
      right = 14,
      top = 18,
      bottom = 22;
    const svg = el('svg', {
      class: 'chart',
      viewBox: '0 0 ' + width + ' ' + height,
      role: 'img',
      'aria-label': t(
        '{title} over the last {minutes} minutes, in {unit}; the table below has the values now',
        { title: title, minutes: WINDOW_MIN, unit: unit.axis },
      ),
    });
    let max = 0;
    lines.forEach(function (l) {
      l.points.forEach(function (p) {
        if (p.v > max) max = p.v;
      });
    });
    const ticks = unit.levels
      ? Array.from({ length: unit.levels }, function (_, i) {
          return i;
        })
      : niceTicks(max, unit.integer);
    const ceiling = ticks[ticks.length - 1] || 1;
    const x = function (when) {
      return left + (width - left - right) * (1 - (nowMs - when) / WINDOW_MS);
    };
    const y = function (v) {
      return top + (height - top - bottom) * (1 - Math.min(v, ceiling) / ceiling);
    };
    svg.appendChild(el('text', { x: 0, y: 11, class: 'unit' }, unit.axis));
    ticks.forEach(function (v) {
      svg.appendChild(
        el('line', { x1: left, x2: width - right, y1: y(v), y2: y(v), class: 'grid' }),
      );
      svg.appendChild(el('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end' }, unit.tick(v)));
    });
    for (let m = WINDOW_MIN; m >= 0; m -= 1) {
      const at = x(nowMs - m * 60000);
      svg.appendChild(
        el('line', { x1: at, x2: at, y1: height - bottom, y2: height - bottom + 4, class: 'grid' }),
      );
      svg.appendChild(
        el(
          'text',
          { x: at, y: height - 4, 'text-anchor': 'middle' },
          m === 0 ? t('now') : t('−{n} min', { n: m }),
        ),
      );
    }
    lines.forEach(function (l) {
      const pts = [];
      l.points.forEach(function (p, i) {
        if (p.t < nowMs - WINDOW_MS) return;
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
    headers.forEach(function (h, i) {
      head.appendChild(el('th', i ? { class: 'n', scope: 'col' } : { scope: 'col' }, h));
    });
    tab.appendChild(el('thead')).appendChild(head);
    const tbody = tab.appendChild(el('tbody'));
    if (!rows.length) {
      tbody
        .appendChild(el('tr'))
        .appendChild(el('td', { colspan: headers.length, class: 'meta' }, empty || t('none')));
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
      r.cells.forEach(function (c) {
        tr.appendChild(el('td', { class: 'n' }, c));
      });
      tbody.appendChild(tr);
    });
    parent.appendChild(tab);
  }
  // A chart of one history entry and the table of its series now: ids sorted by name, series that
  // never left zero in the window left off when hideZero (most refusal reasons, most of the time).
  function timeline(id, title, unit, names, nowMs, opts) {
    opts = opts || {};
    const card = panel(id, title, opts.note);
    const b = body(card);
    const h = history[id] || {};
    const ids = Object.keys(h)
      .filter(function (k) {
        return (
          !opts.hideZero ||
          h[k].some(function (p) {
            return p.v > 0;
          })
        );
      })
      .sort(function (a, b2) {
        return names(a).localeCompare(names(b2));
      });
    const lines = ids.map(function (k, i) {
      return { id: k, points: h[k], color: COLORS[i % COLORS.length] };
    });
    chart(b, title, unit, lines, nowMs);
    const rows = lines.map(function (l) {
      const last = l.points[l.points.length - 1].v;
      return {
        id: l.id,
        name: names(l.id),
        color: l.color,
        value: last,
        cells: [unit.value(last)].concat(opts.extra ? opts.extra(l.id) : []),
      };
    });
    table(b, opts.headers || [t('What'), t('Now')], rows.concat(opts.rows || []), opts.empty);
    return card;
  }

  function storagePanel(m, nowMs) {
    const live = first(m, 'sluice_storage_live_bytes');
    if (live === undefined) return;
    const quota = first(m, 'sluice_storage_quota_bytes') || 0;
    push('storage', 'live', nowMs, live);
    if (quota > 0) push('storage', 'quota', nowMs, quota);
    const names = function (k) {
      return k === 'live' ? t('live pastes') : t('quota');
    };
    const day = first(m, 'sluice_storage_created_bytes_24h');
    const plan = first(m, 'sluice_plan_put_bytes_per_day') || 0;
    const refused = first(m, 'sluice_storage_quota_refusals_total');
    const rows = [];
    if (quota > 0) {
      rows.push({
        name: t('used'),
        cells: [t('{share} of the quota', { share: percent(live / quota) })],
      });
    } else {
      rows.push({ name: t('quota'), cells: [t('none (max_storage_bytes = 0)')] });
    }
    if (day !== undefined) {
      rows.push({
        name: t('created in the last 24 h (this process)'),
        cells: [
          plan > 0
            ? t('{size} of {plan} a day planned', { size: bytes(day), plan: bytes(plan) })
            : bytes(day),
        ],
      });
    }
    if (refused !== undefined)
      rows.push({ name: t('creates refused for the quota (507)'), cells: [count(refused)] });
    timeline('storage', t('Storage against the quota'), UNITS.bytes, names, nowMs, {
      rows: rows,
      note: t('Creates that would pass the quota answer 507 storage_quota.'),
    });
  }

  function reportsPanel(now, nowMs) {
    const m = now.metrics;
    let pending = first(m, 'sluice_reports_pending');
    if (pending === undefined && typeof now.reports_pending === 'number')
      pending = now.reports_pending;
    const existing = document.getElementById('card-reports');
    if (pending === undefined) {
      if (existing) existing.hidden = true;
      return;
    }
    push('reports', 'pending', nowMs, pending);
    const card = timeline(
      'reports',
      t('Reports pending review'),
      UNITS.reports,
      function () {
        return t('reports waiting');
      },
      nowMs,
      {
        note: t('Pastes reported by visitors that the operator has not reviewed (sluice admin).'),
      },
    );
    card.hidden = false;
  }

  // Buckets of "le" (share of the budget used) are read as a Prometheus histogram: cumulative. A
  // count that goes down cannot be cumulative, so such a list is taken per bucket as it stands.
  function budgetBuckets(list) {
    const cumulative = list.every(function (b, i) {
      return i === 0 || b.keys >= list[i - 1].keys;
    });
    return list.map(function (b, i) {
      const lower = i === 0 ? 0 : Number(list[i - 1].le);
      const upper = b.le === '+Inf' || b.le === Infinity ? null : Number(b.le);
      return {
        upper: upper,
        label:
          upper === null
            ? t('over {share}', { share: percent(lower) })
            : i === 0
              ? t('up to {share}', { share: percent(upper) })
              : t('{lower} to {upper}', { lower: percent(lower), upper: percent(upper) }),
        keys: cumulative && i > 0 ? b.keys - list[i - 1].keys : b.keys,
      };
    });
  }
  // Aggregates only: which keys and networks are behind them is the admin listener's to say
  // (sluice admin top), since any name here would tie new pastes to their creators' networks.
  function abusePanels(now) {
    const a = now.abuse;
    const empty = t('no data');
    // Sentences are joined as the language joins them: Japanese and Chinese put no space after
    // their full stop.
    const sentences = function (list) {
      return list.reduce(function (text, next) {
        return t('{sentence} {next}', { sentence: text, next: next });
      });
    };
    const note = [t('Many keys each under budget is growth; a few keys at their budget is abuse.')];
    if (a && a.window_seconds)
      note.push(t('Over the last {duration}.', { duration: duration(a.window_seconds) }));
    note.push(t('Who they are: sluice admin top, on the admin listener.'));
    const b = body(panel('budget', t('Budget use across client keys'), sentences(note)));
    const list = a && Array.isArray(a.budget_use) ? budgetBuckets(a.budget_use) : [];
    if (list.length) {
      const width = Math.max(240, Math.round(b.getBoundingClientRect().width) || 320);
      const height = 132,
        left = 58,
        right = 10,
        top = 18,
        bottom = 22;
      const max = list.reduce(function (x, r) {
        return Math.max(x, r.keys);
      }, 0);
      const ticks = niceTicks(max, true),
        ceiling = ticks[ticks.length - 1];
      const svg = el('svg', {
        class: 'chart',
        viewBox: '0 0 ' + width + ' ' + height,
        role: 'img',
        'aria-label': t(
          'Client keys by share of their create budget used; the table below has the counts',
        ),
      });
      svg.appendChild(el('text', { x: 0, y: 11, class: 'unit' }, t('keys')));
      const y = function (v) {
        return top + (height - top - bottom) * (1 - v / ceiling);
      };
      ticks.forEach(function (v) {
        svg.appendChild(
          el('line', { x1: left, x2: width - right, y1: y(v), y2: y(v), class: 'grid' }),
        );
        svg.appendChild(el('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end' }, count(v)));
      });
      const slot = (width - left - right) / list.length;
      list.forEach(function (r, i) {
        svg.appendChild(
          el('rect', {
            x: left + i * slot + 2,
            y: y(r.keys),
            width: Math.max(1, slot - 4),
            height: y(0) - y(r.keys),
            fill: COLORS[0],
          }),
        );
      });
      // Each bar is labelled with its bucket's upper bound; the table spells the buckets out.
      list.forEach(function (r, i) {
        svg.appendChild(
          el(
            'text',
            { x: left + (i + 0.5) * slot, y: height - 4, 'text-anchor': 'middle' },
            r.upper === null ? t('more') : t('≤ {share}', { share: percent(r.upper) }),
          ),
        );
      });
      b.appendChild(svg);
    }
    const rows = list.map(function (r) {
      return { name: r.label, cells: [count(r.keys)] };
    });
    if (a && typeof a.global_cap_saturation === 'number') {
      rows.push({ name: t('global create cap used'), cells: [percent(a.global_cap_saturation)] });
    }
    table(b, [t('Share of budget used'), t('Keys')], rows, empty);
  }

  function update(now) {
    const prev = previous;
    const seconds = prev ? (now.time_ms - prev.time_ms) / 1000 : 0;
    const m = now.metrics;
    const nowMs = now.time_ms;

    const limits = {},
      peaks = {};
    series(m, 'sluice_pool_limit').forEach(function (s) {
      limits[s.labels.pool] = s.value;
    });
    series(m, 'sluice_pool_peak').forEach(function (s) {
      peaks[s.labels.pool] = s.value;
    });
    series(m, 'sluice_pool_in_use').forEach(function (s) {
      push('pools', s.labels.pool, nowMs, s.value);
    });
    const createBytes = first(m, 'sluice_create_bytes_in_use');
    const createBytesLimit = first(m, 'sluice_create_bytes_limit');
    timeline(
      'pools',
      t('Slots in use'),
      UNITS.slots,
      function (p) {
        return word('pool', p);
      },
      nowMs,
      {
        headers: [t('Pool'), t('In use'), t('Limit'), t('Peak')],
        extra: function (p) {
          return [
            p in limits ? count(limits[p]) : '\u2013',
            p in peaks ? count(peaks[p]) : '\u2013',
          ];
        },
        rows:
          createBytes === undefined
            ? []
            : [
                {
                  name: t('create bytes in flight'),
                  cells: [
                    bytes(createBytes),
                    createBytesLimit ? bytes(createBytesLimit) : '\u2013',
                    '\u2013',
                  ],
                },
              ],
      },
    );

    const byStatus = {},
      statusTotals = {};
    series(m, 'sluice_http_requests_total').forEach(function (s) {
      const st = s.labels.status;
      byStatus[st] = (byStatus[st] || 0) + rate(now, prev, s.key, seconds);
      statusTotals[st] = (statusTotals[st] || 0) + s.value;
    });
    const reasons = {},
      reasonTotals = {};
    series(m, 'sluice_admission_rejections_total').forEach(function (s) {
      reasons[s.labels.reason] = rate(now, prev, s.key, seconds);
      reasonTotals[s.labels.reason] = s.value;
    });
    series(m, 'sluice_view_rung_total').forEach(function (s) {
      if (s.labels.rung !== 'plain' || !s.labels.reason) return;
      reasons['view_' + s.labels.reason] = rate(now, prev, s.key, seconds);
      reasonTotals['view_' + s.labels.reason] = s.value;
    });
    const latency = {},
      calls = {};
    series(m, 'sluice_dependency_duration_seconds_count').forEach(function (s) {
      const id = (s.labels.dependency || '') + '/' + (s.labels.op || '');
      const n = rate(now, prev, s.key, seconds);
      const time = rate(now, prev, s.key.replace('_count', '_sum'), seconds);
      latency[id] = n > 0 ? (1000 * time) / n : 0;
      calls[id] = s.value;
    });
    if (prev) {
      Object.keys(byStatus).forEach(function (st) {
        push('status', st, nowMs, byStatus[st]);
      });
      Object.keys(reasons).forEach(function (r) {
        push('sheds', r, nowMs, reasons[r]);
      });
      Object.keys(latency).forEach(function (id) {
        push('latency', id, nowMs, latency[id]);
      });
    }
    timeline(
      'status',
      t('Responses per second, by status'),
      UNITS.rate,
      function (st) {
        return word('status', st);
      },
      nowMs,
      {
        hideZero: true,
        headers: [t('Status'), t('Now'), t('Since start')],
        extra: function (st) {
          return [count(statusTotals[st] || 0)];
        },
        empty: t('no responses yet'),
      },
    );
    timeline(
      'sheds',
      t('Refusals and sheds per second, by reason'),
      UNITS.rate,
      function (r) {
        return word('reason', r);
      },
      nowMs,
      {
        hideZero: true,
        headers: [t('Reason'), t('Now'), t('Since start')],
        extra: function (r) {
          return [count(reasonTotals[r] || 0)];
        },
        rows: Object.keys(reasonTotals)
          .filter(function (r) {
            return (
              reasonTotals[r] > 0 &&
              !(
                history.sheds &&
                history.sheds[r] &&
                history.sheds[r].some(function (p) {
                  return p.v > 0;
                })
              )
            );
          })
          .sort()
          .map(function (r) {
            return {
              name: word('reason', r),
              cells: [UNITS.rate.value(0), count(reasonTotals[r])],
            };
          }),
        empty: t('none since start'),
      },
    );
    const callName = function (id) {
      const parts = id.split('/');
      return t('{dependency}: {op}', {
        dependency: word('dependency', parts[0]),
        op: word('op', parts[1]),
      });
    };
    timeline('latency', t('Dependency latency (mean over each poll)'), UNITS.ms, callName, nowMs, {
      hideZero: true,
      headers: [t('Call'), t('Now'), t('Calls since start')],
      extra: function (id) {
        return [count(calls[id] || 0)];
      },
      empty: t('no calls in the window'),
    });

    const changes = {};
    series(m, 'sluice_breaker_transitions_total').forEach(function (s) {
      changes[s.labels.dependency] = (changes[s.labels.dependency] || 0) + s.value;
    });
    series(m, 'sluice_breaker_state').forEach(function (s) {
      push('breakers', s.labels.dependency, nowMs, BREAKER_LEVEL[s.value] || 0);
    });
    timeline(
      'breakers',
      t('Circuit breakers'),
      UNITS.breaker,
      function (d) {
        return word('dependency', d);
      },
      nowMs,
      {
        headers: [t('Dependency'), t('State'), t('Changes since start')],
        extra: function (d) {
          return [count(changes[d] || 0)];
        },
        note: t(
          'Closed: calls go through. Open: calls are refused at once. Half-open: a few trial calls.',
        ),
      },
    );

    const arrivals = first(m, 'sluice_view_arrival_rate');
    const sustainable = first(m, 'sluice_view_sustainable_rate');
    if (arrivals !== undefined) push('ladder', 'arrivals', nowMs, arrivals);
    if (sustainable !== undefined) push('ladder', 'sustainable', nowMs, sustainable);
    const ladderRows = [];
    const shed = first(m, 'sluice_view_shed_percent');
    if (shed !== undefined)
      ladderRows.push({
        name: t('views shown plain now'),
        cells: [t('{n} %', { n: decimal(shed) })],
      });
    const service = first(m, 'sluice_view_service_seconds');
    if (service !== undefined)
      ladderRows.push({ name: t('time one render takes'), cells: [duration(service)] });
    timeline(
      'ladder',
      t('Highlighter: views needing a render against what it sustains'),
      UNITS.rate,
      function (k) {
        return k === 'arrivals' ? t('views needing a render') : t('renders it sustains');
      },
      nowMs,
      { rows: ladderRows },
    );

    series(m, 'sluice_outbox_age_seconds').forEach(function (s) {
      push('outbox', 'age', nowMs, s.value);
    });
    const outboxRows = [];
    const done = first(m, 'sluice_outbox_done_total');
    if (done !== undefined)
      outboxRows.push({ name: t('jobs done since start'), cells: [count(done)] });
    const retries = first(m, 'sluice_outbox_retries_total');
    if (retries !== undefined)
      outboxRows.push({ name: t('retries since start'), cells: [count(retries)] });
    timeline(
      'outbox',
      t('Outbox: age of the oldest job'),
      UNITS.seconds,
      function () {
        return t('oldest job');
      },
      nowMs,
      { rows: outboxRows, note: t('Deletes and purges still owed to the stores and the edge.') },
    );

    storagePanel(m, nowMs);
    reportsPanel(now, nowMs);
    abusePanels(now);

    const failOpen = first(m, 'sluice_limiter_fail_open');
    const lb = body(panel('limiter', t('Limiter')));
    if (failOpen === undefined) {
      lb.appendChild(
        el(
          'p',
          {},
          t('In-process token buckets; no shared limiter store, so nothing can fail open here.'),
        ),
      );
    } else {
      lb.appendChild(
        el(
          'p',
          {},
          failOpen > 0
            ? t(
                'The shared limiter store is not answering: per-visitor create limits are open and the global caps run on this process’s share.',
              )
            : t('The shared limiter store is answering.'),
        ),
      );
    }

    const stamp = document.getElementById('updated');
    if (stamp)
      stamp.textContent = new Date(nowMs).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
    previous = now;
  }
  function poll() {
    fetch('/api/v1/status', { cache: 'no-store' })
      .then(function (r) {
        return r.json();
      })
      .then(update)
      // A missed poll leaves the panels as they were; the next one catches up.
      .catch(function (e) {
        console.error('sluice status:', e);
      })
      .finally(function () {
        setTimeout(poll, POLL_MS);
      });
  }
  poll();
})();
