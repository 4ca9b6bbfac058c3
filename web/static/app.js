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
  if (form) {
    const area = form.querySelector('textarea');
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
