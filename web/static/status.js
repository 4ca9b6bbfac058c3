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
      create: 'create slots',
      read: 'read slots',
      fill: 'cache-fill slots',
      highlight: 'highlighter slots',
      view: 'view slots',
    },
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
    status: {
      200: '200 OK',
      201: '201 created',
      204: '204 deleted',
      304: '304 not modified',
      400: '400 bad request',
      401: '401 no token',
      404: '404 not found',
      405: '405 wrong method',
      408: '408 too slow',
      411: '411 no length',
      413: '413 too large',
      429: '429 rate limit',
      451: '451 withheld',
      500: '500 server error',
      503: '503 overloaded',
      504: '504 timed out',
      507: '507 storage full',
    },
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
  function count(v) {
    return Math.round(v).toLocaleString('en-US');
  }
  function bytes(v) {
    if (v < 1000) return count(v) + ' bytes';
    const units = ['KB', 'MB', 'GB', 'TB'];
    let i = -1;
    do {
      v /= 1000;
      i += 1;
    } while (v >= 1000 && i < units.length - 1);
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
  function percent(share) {
    return decimal(100 * share) + ' %';
  }

  // How each chart's unit is named on its axis and written in its table.
  const UNITS = {
    slots: { axis: 'slots', integer: true, tick: count, value: count },
    rate: {
      axis: 'per second',
      tick: decimal,
      value: function (v) {
        return decimal(v) + ' per second';
      },
    },
    ms: {
      axis: 'ms',
      tick: decimal,
      value: function (v) {
        return decimal(v) + ' ms';
      },
    },
    seconds: { axis: 'seconds', tick: decimal, value: duration },
    bytes: { axis: 'bytes', integer: true, tick: bytes, value: bytes },
    reports: { axis: 'reports', integer: true, tick: count, value: count },
    breaker: {
      axis: 'state',
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
  function chart(parent, title, unit, lines, t) {
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
      'aria-label':
        title +
        ' over the last ' +
        WINDOW_MIN +
        ' minutes, in ' +
        unit.axis +
        '; the table below has the values now',
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
      return left + (width - left - right) * (1 - (t - when) / WINDOW_MS);
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
      const at = x(t - m * 60000);
      svg.appendChild(
        el('line', { x1: at, x2: at, y1: height - bottom, y2: height - bottom + 4, class: 'grid' }),
      );
      svg.appendChild(
        el(
          'text',
          { x: at, y: height - 4, 'text-anchor': 'middle' },
          m === 0 ? 'now' : '\u2212' + m + ' min',
        ),
      );
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
    headers.forEach(function (h, i) {
      head.appendChild(el('th', i ? { class: 'n', scope: 'col' } : { scope: 'col' }, h));
    });
    tab.appendChild(el('thead')).appendChild(head);
    const tbody = tab.appendChild(el('tbody'));
    if (!rows.length) {
      tbody
        .appendChild(el('tr'))
        .appendChild(el('td', { colspan: headers.length, class: 'meta' }, empty || 'none'));
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
  function timeline(id, title, unit, names, t, opts) {
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
    chart(b, title, unit, lines, t);
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
    table(b, opts.headers || ['What', 'Now'], rows.concat(opts.rows || []), opts.empty);
    return card;
  }

  function storagePanel(m, t) {
    const live = first(m, 'sluice_storage_live_bytes');
    if (live === undefined) return;
    const quota = first(m, 'sluice_storage_quota_bytes') || 0;
    push('storage', 'live', t, live);
    if (quota > 0) push('storage', 'quota', t, quota);
    const names = function (k) {
      return k === 'live' ? 'live pastes' : 'quota';
    };
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
      rows.push({
        name: 'created in the last 24 h (this process)',
        cells: [bytes(day) + (plan > 0 ? ' of ' + bytes(plan) + ' a day planned' : '')],
      });
    }
    if (refused !== undefined)
      rows.push({ name: 'creates refused for the quota (507)', cells: [count(refused)] });
    timeline('storage', 'Storage against the quota', UNITS.bytes, names, t, {
      rows: rows,
      note: 'Creates that would pass the quota answer 507 storage_quota.',
    });
  }

  function reportsPanel(now, t) {
    const m = now.metrics;
    let pending = first(m, 'sluice_reports_pending');
    if (pending === undefined && typeof now.reports_pending === 'number')
      pending = now.reports_pending;
    const existing = document.getElementById('card-reports');
    if (pending === undefined) {
      if (existing) existing.hidden = true;
      return;
    }
    push('reports', 'pending', t, pending);
    const card = timeline(
      'reports',
      'Reports pending review',
      UNITS.reports,
      function () {
        return 'reports waiting';
      },
      t,
      { note: 'Pastes reported by visitors that the operator has not reviewed (sluice admin).' },
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
            ? 'over ' + percent(lower)
            : (i === 0 ? 'up to ' : percent(lower) + ' to ') + percent(upper),
        keys: cumulative && i > 0 ? b.keys - list[i - 1].keys : b.keys,
      };
    });
  }
  // Aggregates only: which keys and networks are behind them is the admin listener's to say
  // (sluice admin top), since any name here would tie new pastes to their creators' networks.
  function abusePanels(now) {
    const a = now.abuse;
    const empty = 'no data';
    const over = a && a.window_seconds ? ' Over the last ' + duration(a.window_seconds) + '.' : '';
    const b = body(
      panel(
        'budget',
        'Budget use across client keys',
        'Many keys each under budget is growth; a few keys at their budget is abuse.' +
          over +
          ' Who they are: sluice admin top, on the admin listener.',
      ),
    );
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
        'aria-label':
          'Client keys by share of their create budget used; the table below has the counts',
      });
      svg.appendChild(el('text', { x: 0, y: 11, class: 'unit' }, 'keys'));
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
            r.upper === null ? 'more' : '\u2264 ' + percent(r.upper),
          ),
        );
      });
      b.appendChild(svg);
    }
    const rows = list.map(function (r) {
      return { name: r.label, cells: [count(r.keys)] };
    });
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

    const limits = {},
      peaks = {};
    series(m, 'sluice_pool_limit').forEach(function (s) {
      limits[s.labels.pool] = s.value;
    });
    series(m, 'sluice_pool_peak').forEach(function (s) {
      peaks[s.labels.pool] = s.value;
    });
    series(m, 'sluice_pool_in_use').forEach(function (s) {
      push('pools', s.labels.pool, t, s.value);
    });
    const createBytes = first(m, 'sluice_create_bytes_in_use');
    const createBytesLimit = first(m, 'sluice_create_bytes_limit');
    timeline(
      'pools',
      'Slots in use',
      UNITS.slots,
      function (p) {
        return word('pool', p);
      },
      t,
      {
        headers: ['Pool', 'In use', 'Limit', 'Peak'],
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
                  name: 'create bytes in flight',
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
        push('status', st, t, byStatus[st]);
      });
      Object.keys(reasons).forEach(function (r) {
        push('sheds', r, t, reasons[r]);
      });
      Object.keys(latency).forEach(function (id) {
        push('latency', id, t, latency[id]);
      });
    }
    timeline(
      'status',
      'Responses per second, by status',
      UNITS.rate,
      function (st) {
        return word('status', st);
      },
      t,
      {
        hideZero: true,
        headers: ['Status', 'Now', 'Since start'],
        extra: function (st) {
          return [count(statusTotals[st] || 0)];
        },
        empty: 'no responses yet',
      },
    );
    timeline(
      'sheds',
      'Refusals and sheds per second, by reason',
      UNITS.rate,
      function (r) {
        return word('reason', r);
      },
      t,
      {
        hideZero: true,
        headers: ['Reason', 'Now', 'Since start'],
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
            return { name: word('reason', r), cells: ['0 per second', count(reasonTotals[r])] };
          }),
        empty: 'none since start',
      },
    );
    const callName = function (id) {
      const parts = id.split('/');
      return word('dependency', parts[0]) + ': ' + word('op', parts[1]);
    };
    timeline('latency', 'Dependency latency (mean over each poll)', UNITS.ms, callName, t, {
      hideZero: true,
      headers: ['Call', 'Now', 'Calls since start'],
      extra: function (id) {
        return [count(calls[id] || 0)];
      },
      empty: 'no calls in the window',
    });

    const changes = {};
    series(m, 'sluice_breaker_transitions_total').forEach(function (s) {
      changes[s.labels.dependency] = (changes[s.labels.dependency] || 0) + s.value;
    });
    series(m, 'sluice_breaker_state').forEach(function (s) {
      push('breakers', s.labels.dependency, t, BREAKER_LEVEL[s.value] || 0);
    });
    timeline(
      'breakers',
      'Circuit breakers',
      UNITS.breaker,
      function (d) {
        return word('dependency', d);
      },
      t,
      {
        headers: ['Dependency', 'State', 'Changes since start'],
        extra: function (d) {
          return [count(changes[d] || 0)];
        },
        note: 'Closed: calls go through. Open: calls are refused at once. Half-open: a few trial calls.',
      },
    );

    const arrivals = first(m, 'sluice_view_arrival_rate');
    const sustainable = first(m, 'sluice_view_sustainable_rate');
    if (arrivals !== undefined) push('ladder', 'arrivals', t, arrivals);
    if (sustainable !== undefined) push('ladder', 'sustainable', t, sustainable);
    const ladderRows = [];
    const shed = first(m, 'sluice_view_shed_percent');
    if (shed !== undefined)
      ladderRows.push({ name: 'views shown plain now', cells: [decimal(shed) + ' %'] });
    const service = first(m, 'sluice_view_service_seconds');
    if (service !== undefined)
      ladderRows.push({ name: 'time one render takes', cells: [duration(service)] });
    timeline(
      'ladder',
      'Highlighter: views needing a render against what it sustains',
      UNITS.rate,
      function (k) {
        return k === 'arrivals' ? 'views needing a render' : 'renders it sustains';
      },
      t,
      { rows: ladderRows },
    );

    series(m, 'sluice_outbox_age_seconds').forEach(function (s) {
      push('outbox', 'age', t, s.value);
    });
    const outboxRows = [];
    const done = first(m, 'sluice_outbox_done_total');
    if (done !== undefined)
      outboxRows.push({ name: 'jobs done since start', cells: [count(done)] });
    const retries = first(m, 'sluice_outbox_retries_total');
    if (retries !== undefined)
      outboxRows.push({ name: 'retries since start', cells: [count(retries)] });
    timeline(
      'outbox',
      'Outbox: age of the oldest job',
      UNITS.seconds,
      function () {
        return 'oldest job';
      },
      t,
      { rows: outboxRows, note: 'Deletes and purges still owed to the stores and the edge.' },
    );

    storagePanel(m, t);
    reportsPanel(now, t);
    abusePanels(now);

    const failOpen = first(m, 'sluice_limiter_fail_open');
    const lb = body(panel('limiter', 'Limiter'));
    if (failOpen === undefined) {
      lb.appendChild(
        el(
          'p',
          {},
          'In-process token buckets; no shared limiter store, so nothing can fail open here.',
        ),
      );
    } else {
      lb.appendChild(
        el(
          'p',
          {},
          failOpen > 0
            ? 'The shared limiter store is not answering: per-visitor create limits are open and the global caps run on this process\u2019s share.'
            : 'The shared limiter store is answering.',
        ),
      );
    }

    const stamp = document.getElementById('updated');
    if (stamp)
      stamp.textContent = new Date(t).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
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
