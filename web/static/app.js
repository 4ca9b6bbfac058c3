// sluice: conveniences only; every page works without this file.
'use strict';
(function () {
  // The page's messages in its language: a JSON data block the server puts in the page
  // (src/http/pages.cc, docs/translations.md); without one, the English msgids themselves.
  const messages = (function () {
    const block = document.getElementById('i18n-app');
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

  function flash(button, text) {
    const old = button.textContent;
    button.textContent = text;
    setTimeout(function () {
      button.textContent = old;
    }, 1500);
  }
  function copy(text, button) {
    const done = function () {
      flash(button, t('Copied'));
    };
    const fallback = function () {
      const area = document.createElement('textarea');
      area.value = text;
      area.setAttribute('readonly', '');
      area.style.position = 'fixed';
      area.style.opacity = '0';
      document.body.appendChild(area);
      area.select();
      try {
        document.execCommand('copy');
        done();
      } catch {
        flash(button, t('Copy failed'));
      }
      area.remove();
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  }
  document.querySelectorAll('.js-only').forEach(function (el) {
    el.hidden = false;
  });
  document.querySelectorAll('[data-copy-from]').forEach(function (button) {
    button.addEventListener('click', function () {
      const source = document.getElementById(button.getAttribute('data-copy-from'));
      if (!source) return;
      const text =
        'value' in source && source.tagName !== 'PRE' ? source.value : source.textContent;
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
      const a = parseInt(m[1], 10),
        b = m[2] ? parseInt(m[2], 10) : a;
      return [Math.min(a, b), Math.max(a, b)];
    };
    const mark = function (scroll) {
      code.querySelectorAll('.l.sel').forEach(function (el) {
        el.classList.remove('sel');
      });
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
      const gutter =
        code.getBoundingClientRect().left + parseFloat(getComputedStyle(code).paddingLeft);
      if (e.clientX >= gutter) return;
      const n = parseInt(line.id.slice(1), 10);
      const hash =
        e.shiftKey && anchor && anchor !== n
          ? '#L' + Math.min(anchor, n) + '-L' + Math.max(anchor, n)
          : '#L' + n;
      if (!e.shiftKey) anchor = n;
      // replaceState keeps the page still (a new hash would jump); :target then lags, .sel leads.
      history.replaceState(null, '', hash);
      mark(false);
      e.preventDefault();
    });
    window.addEventListener('hashchange', function () {
      mark(true);
    });
    mark(true);
  }
  const form = document.getElementById('create');

  // Proof of work (docs/overload.md, "Proof of work"). While many addresses together spend the
  // server's create budget, it asks a create for the solution of a challenge; Web Workers
  // (pow.js, named by the form only when the server has the rung on) search while the page
  // shows how far it has got: a progress bar, and a status a screen reader announces at the start
  // and the end (not at every step, which would drown the page). Resolves to the solution, the
  // payload the server takes, or null if this browser cannot find it (then the create goes as it
  // is and meets the same 429 as without this script).
  const powWorker = form ? form.getAttribute('data-pow-worker') : null;
  // Workers searching side by side, each a part of the range: a phone has cores to spare, and
  // more than four buys little (the secret is uniform, so the mean search is half a part).
  function workerCount() {
    return Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1));
  }
  function solveChallenge(challenge) {
    return new Promise(function (resolve) {
      const box = document.getElementById('pow');
      const bar = document.getElementById('pow-progress');
      const status = document.getElementById('pow-status');
      if (!powWorker || !window.Worker || !box || !bar || !status) {
        resolve(null);
        return;
      }
      const total = Number(challenge.maxnumber) + 1;
      const count = Math.min(workerCount(), total);
      const part = Math.ceil(total / count);
      const workers = [];
      const searched = [];
      let running = 0;
      let ended = false;
      const started = performance.now();
      const end = function (payload, text) {
        if (ended) return;
        ended = true;
        workers.forEach(function (w) {
          w.terminate();
        });
        form.removeAttribute('aria-busy');
        status.textContent = text;
        resolve(payload);
      };
      const failed = function () {
        end(null, t('Your browser could not solve the puzzle; the paste is sent without it.'));
      };
      const solved = function (number) {
        const ms = performance.now() - started;
        bar.value = 100;
        form.setAttribute('data-pow-ms', String(Math.round(ms)));
        const seconds = (ms / 1000).toLocaleString(document.documentElement.lang || undefined, {
          maximumFractionDigits: 1,
        });
        const fields = {
          algorithm: challenge.algorithm,
          challenge: challenge.challenge,
          number: number,
          salt: challenge.salt,
          signature: challenge.signature,
        };
        end(
          btoa(JSON.stringify(fields)),
          t('Solved in {seconds} s: sending your paste.', { seconds }),
        );
      };
      bar.value = 0;
      bar.setAttribute('aria-label', t('Puzzle progress'));
      box.hidden = false;
      form.setAttribute('aria-busy', 'true');
      status.textContent = t(
        'Many pastes are being created at once, so your browser first solves a small puzzle to show it is not a flood. Your paste is sent as soon as it is done.',
      );
      try {
        for (let k = 0; k < count; k++) {
          const worker = new Worker(powWorker);
          workers.push(worker);
          searched.push(0);
          running++;
          worker.onmessage = function (e) {
            const m = e.data;
            if (typeof m.searched === 'number') {
              searched[k] = m.searched;
              const sum = searched.reduce(function (a, b) {
                return a + b;
              }, 0);
              bar.value = Math.min(99, Math.floor((100 * sum) / total));
            } else if (typeof m.number === 'number') {
              solved(m.number);
            } else if (--running === 0) {
              failed(); // every part searched, or none could be
            }
          };
          worker.onerror = function (e) {
            e.preventDefault();
            failed();
          };
          const from = k * part;
          worker.postMessage({
            challenge: challenge,
            from: from,
            to: Math.min(total, from + part) - 1,
          });
        }
      } catch {
        failed();
      }
    });
  }
  // crypt.js sends an encrypted paste itself and meets the challenge in the 429's JSON.
  window.sluicePow = { solve: solveChallenge };

  // The challenge the server would ask this create for now (GET /api/v1/limits), or null: asked
  // before the form leaves, since a refused form's text would be gone with its page.
  function challengeBeforeCreate() {
    const abort = new AbortController();
    const timer = setTimeout(function () {
      abort.abort();
    }, 3000);
    return fetch('/api/v1/limits', {
      headers: { Accept: 'application/json' },
      credentials: 'same-origin',
      signal: abort.signal,
    })
      .then(function (r) {
        return r.ok ? r.json() : {};
      })
      .then(function (j) {
        const pow = j && j.proof_of_work;
        return pow && pow.asked && pow.challenge ? pow.challenge : null;
      })
      .catch(function () {
        return null;
      })
      .finally(function () {
        clearTimeout(timer);
      });
  }

  if (form) {
    const area = form.querySelector('textarea');
    if (powWorker) {
      const action = form.getAttribute('action');
      form.addEventListener('submit', function (e) {
        const encrypt = document.getElementById('encrypt');
        if (encrypt && encrypt.checked) return; // crypt.js's own submit handler sends it
        e.preventDefault();
        const button = form.querySelector('button[type=submit]');
        button.disabled = true;
        challengeBeforeCreate()
          .then(function (challenge) {
            return challenge ? solveChallenge(challenge) : null;
          })
          .then(function (proof) {
            // The solution rides in the query: the server reads a form's body only after the
            // create is admitted. Set afresh each time, so a page come back to never resends a
            // spent one. submit() fires no submit event, so this handler does not run again.
            form.setAttribute(
              'action',
              proof ? action + '?proof=' + encodeURIComponent(proof) : action,
            );
            button.disabled = false;
            form.submit();
          });
      });
    }
    // A fork of a large paste: the page does not carry the text (src/http/pages.cc, IndexPage),
    // so it is loaded here from the raw link, as text, never as markup.
    const from = area.getAttribute('data-prefill-from');
    if (from) {
      area.disabled = true;
      fetch(from, { credentials: 'same-origin' })
        .then(function (r) {
          if (!r.ok) throw new Error(String(r.status));
          return r.text();
        })
        .then(function (text) {
          area.value = text;
        })
        .catch(function () {
          const problem = document.getElementById('create-problem');
          if (problem) {
            problem.textContent = t(
              'The text could not be loaded: copy it from the raw link above.',
            );
            problem.hidden = false;
          }
        })
        .finally(function () {
          area.disabled = false;
        });
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
        const s = area.selectionStart,
          t = area.selectionEnd;
        area.setRangeText('\t', s, t, 'end');
      }
    });
  }
})();
