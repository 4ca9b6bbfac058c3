// sluice: end-to-end encrypted pastes in the browser (docs/encryption.md, envelope version 1).
// The key is made here and travels only in the link's fragment (after '#'), which a browser never
// sends to a server; the server stores and serves the envelope and cannot open it. Text reaches
// the page through textContent only.
'use strict';
(function () {
  // The page's messages in its language: a JSON data block the server puts in the page
  // (src/http/pages.cc, docs/translations.md); without one, the English msgids themselves.
  const messages = (function () {
    const block = document.getElementById('i18n-crypt');
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

  const ALG = 'A256GCM',
    KDF = 'PBKDF2-SHA256',
    ITER = 600000;
  const MIN_ITER = 100000,
    MAX_ITER = 2000000,
    IV_BYTES = 12,
    SALT_BYTES = 16,
    KEY_BYTES = 32;
  const TAG_BYTES = 16;
  const utf8 = new TextEncoder();

  class CryptError extends Error {
    constructor(code, message) {
      super(message);
      this.code = code;
    }
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
    const bad = new CryptError(
      'bad_envelope',
      t("'{field}' is not canonical unpadded base64url", { field: field }),
    );
    if (typeof text !== 'string' || !/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1)
      throw bad;
    const bin = atob(
      text.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((text.length + 3) % 4),
    );
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    if (b64u(out) !== text) throw bad; // non-zero trailing bits: another spelling of the bytes
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
    try {
      e = JSON.parse(text);
    } catch {
      throw new CryptError('bad_envelope', t('the envelope is not JSON'));
    }
    const want = ['alg', 'ct', 'iv', 'kdf', 'v', 'z'];
    if (
      !e ||
      typeof e !== 'object' ||
      Array.isArray(e) ||
      Object.keys(e).sort().join() !== want.join()
    ) {
      throw new CryptError(
        'bad_envelope',
        t('the envelope needs exactly the fields v, alg, iv, z, kdf and ct'),
      );
    }
    if (e.v !== 1)
      throw new CryptError(
        'bad_envelope',
        t('unknown envelope version {version}', { version: String(e.v).slice(0, 20) }),
      );
    if (e.alg !== ALG) throw new CryptError('bad_envelope', t("'alg' must be A256GCM"));
    if (e.z !== 'none' && e.z !== 'deflate-raw')
      throw new CryptError('bad_envelope', t("'z' must be none or deflate-raw"));
    const iv = unb64u(e.iv, 'iv');
    if (iv.length !== IV_BYTES) throw new CryptError('bad_envelope', t("'iv' must be 12 bytes"));
    const ct = unb64u(e.ct, 'ct');
    if (ct.length < TAG_BYTES)
      throw new CryptError('bad_envelope', t("'ct' is shorter than the tag"));
    let kdf = null;
    if (e.kdf !== null) {
      const k = e.kdf;
      if (
        !k ||
        typeof k !== 'object' ||
        Array.isArray(k) ||
        Object.keys(k).sort().join() !== 'iter,name,salt'
      ) {
        throw new CryptError('bad_envelope', t("'kdf' needs exactly name, iter and salt"));
      }
      if (k.name !== KDF)
        throw new CryptError('bad_envelope', t("'kdf.name' must be PBKDF2-SHA256"));
      if (!Number.isInteger(k.iter) || k.iter < MIN_ITER || k.iter > MAX_ITER) {
        throw new CryptError('bad_envelope', t("'kdf.iter' must be within [100000, 2000000]"));
      }
      const salt = unb64u(k.salt, 'kdf.salt');
      if (salt.length !== SALT_BYTES)
        throw new CryptError('bad_envelope', t("'kdf.salt' must be 16 bytes"));
      kdf = { iter: k.iter, salt: salt };
    }
    return { iv: iv, z: e.z, kdf: kdf, ct: ct };
  }
  // The authenticated data: the canonical header, so no field can be swapped without failing the tag.
  function aad(e) {
    const kdf = e.kdf
      ? '{"name":"' + KDF + '","iter":' + e.kdf.iter + ',"salt":"' + b64u(e.kdf.salt) + '"}'
      : 'null';
    return (
      '{"v":1,"alg":"' + ALG + '","iv":"' + b64u(e.iv) + '","z":"' + e.z + '","kdf":' + kdf + '}'
    );
  }
  function serialize(e) {
    return aad(e).slice(0, -1) + ',"ct":"' + b64u(e.ct) + '"}';
  }

  async function aesKey(linkKey, kdf, password, usage) {
    if (!kdf) return crypto.subtle.importKey('raw', linkKey, 'AES-GCM', false, [usage]);
    const base = await crypto.subtle.importKey(
      'raw',
      concat(linkKey, utf8.encode(password)),
      'PBKDF2',
      false,
      ['deriveKey'],
    );
    return crypto.subtle.deriveKey(
      { name: 'PBKDF2', hash: 'SHA-256', salt: kdf.salt, iterations: kdf.iter },
      base,
      { name: 'AES-GCM', length: 256 },
      false,
      [usage],
    );
  }

  function canDeflate() {
    try {
      new CompressionStream('deflate-raw');
      new DecompressionStream('deflate-raw');
      return true;
    } catch {
      return false;
    }
  }
  async function deflate(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream('deflate-raw'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  // Inflation stops past `cap`: a small envelope must not inflate to gigabytes (a zip bomb).
  async function inflate(bytes, cap) {
    if (!canDeflate())
      throw new CryptError(
        'unsupported',
        t(
          'this browser cannot decompress this paste (no DecompressionStream("deflate-raw")); use a current browser or sluice get',
        ),
      );
    const reader = new Blob([bytes])
      .stream()
      .pipeThrough(new DecompressionStream('deflate-raw'))
      .getReader();
    const parts = [];
    let total = 0;
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        total += r.value.length;
        if (total > cap) {
          reader.cancel().catch(function () {});
          throw new CryptError(
            'too_large',
            t('the text inflates past {cap} bytes; not opened', { cap: cap }),
          );
        }
        parts.push(r.value);
      }
    } catch (x) {
      if (x instanceof CryptError) throw x;
      throw new CryptError('damaged', t('the compressed text is damaged'));
    }
    const out = new Uint8Array(total);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  // Seals `bytes` (a Uint8Array); returns { envelope, key } with the key as the link's fragment.
  // `fixed` ({ key, iv, salt, iter, compress }) is for the published vectors only.
  async function seal(bytes, password, fixed) {
    fixed = fixed || {};
    const linkKey = fixed.key || crypto.getRandomValues(new Uint8Array(KEY_BYTES));
    const e = {
      iv: fixed.iv || crypto.getRandomValues(new Uint8Array(IV_BYTES)),
      z: 'none',
      kdf: null,
    };
    if (password) {
      e.kdf = {
        iter: fixed.iter || ITER,
        salt: fixed.salt || crypto.getRandomValues(new Uint8Array(SALT_BYTES)),
      };
    }
    let clear = bytes;
    if (fixed.compress !== false && bytes.length > 0 && canDeflate()) {
      const d = await deflate(bytes);
      if (d.length < bytes.length) {
        clear = d;
        e.z = 'deflate-raw';
      }
    }
    const key = await aesKey(linkKey, e.kdf, password, 'encrypt');
    e.ct = new Uint8Array(
      await crypto.subtle.encrypt(
        { name: 'AES-GCM', iv: e.iv, additionalData: utf8.encode(aad(e)), tagLength: 128 },
        key,
        clear,
      ),
    );
    return { envelope: serialize(e), key: b64u(linkKey) };
  }

  // Opens an envelope with the link's key (and password); returns the plaintext bytes.
  async function open(envelopeText, keyText, password, cap) {
    let linkKey;
    try {
      linkKey = unb64u(keyText, 'key');
    } catch {
      linkKey = null;
    }
    if (!linkKey || linkKey.length !== KEY_BYTES) {
      throw new CryptError(
        'bad_key',
        t("the link's key (the part after #) is damaged: copy the whole link"),
      );
    }
    const e = parseEnvelope(envelopeText);
    if (e.kdf && (password === null || password === undefined)) {
      throw new CryptError('password_required', t('this paste is protected by a password'));
    }
    const key = await aesKey(linkKey, e.kdf, password, 'decrypt');
    let clear;
    try {
      clear = new Uint8Array(
        await crypto.subtle.decrypt(
          { name: 'AES-GCM', iv: e.iv, additionalData: utf8.encode(aad(e)), tagLength: 128 },
          key,
          e.ct,
        ),
      );
    } catch {
      throw new CryptError(
        'wrong_key',
        e.kdf
          ? t(
              "Wrong password, or the link's key is not this paste's (the link may be cut short or altered).",
            )
          : t(
              "The link's key does not open this paste: the link may be cut short or altered, or the paste is damaged.",
            ),
      );
    }
    if (e.z === 'none') {
      if (clear.length > cap)
        throw new CryptError(
          'too_large',
          t('the text is over {cap} bytes; not opened', { cap: cap }),
        );
      return clear;
    }
    return inflate(clear, cap);
  }

  window.sluiceCrypt = {
    seal: seal,
    open: open,
    parseEnvelope: parseEnvelope,
    b64u: b64u,
    unb64u: unb64u,
    CryptError: CryptError,
  };

  function show(el, on) {
    if (el) el.hidden = !on;
  }
  function say(el, text, warn) {
    if (!el) return;
    el.textContent = text;
    el.classList.toggle('warn', !!warn);
    el.hidden = false;
  }
  async function errorText(r) {
    try {
      const j = await r.json();
      if (j && j.error) return j.error + ' (HTTP ' + r.status + ')';
    } catch {
      /* not JSON */
    }
    return 'HTTP ' + r.status;
  }

  async function challengeOf(r) {
    try {
      const j = await r.json();
      return j && j.challenge ? j.challenge : null;
    } catch {
      return null;
    }
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
      if (encrypt.checked) area.removeAttribute('name');
      else area.setAttribute('name', 'content');
    };
    encrypt.addEventListener('change', sync);
    sync();
    form.addEventListener('submit', async function (ev) {
      if (!encrypt.checked) return;
      ev.preventDefault();
      show(problem, false);
      const max = Number(form.getAttribute('data-max-bytes')) || 1000000;
      const bytes = utf8.encode(area.value);
      if (bytes.length === 0) {
        say(problem, t('The paste is empty.'), true);
        return;
      }
      if (bytes.length > max) {
        say(
          problem,
          t('The paste is {size} bytes; this server keeps at most {max}.', {
            size: bytes.length,
            max: max,
          }),
          true,
        );
        return;
      }
      const button = form.querySelector('button[type=submit]');
      button.disabled = true;
      try {
        const t0 = performance.now();
        const sealed = await seal(bytes, password.value ? password.value : null);
        form.setAttribute('data-encrypt-ms', String(Math.round(performance.now() - t0)));
        const body = { content: sealed.envelope, encrypted: true, ttl: form.elements.ttl.value };
        if (form.elements.burn.checked) body.burn = true;
        const send = function (proof) {
          const headers = { 'Content-Type': 'application/json', Accept: 'application/json' };
          if (proof) headers['Sluice-Proof'] = proof;
          return fetch('/api/v1/pastes', {
            method: 'POST',
            headers: headers,
            body: JSON.stringify(body),
            credentials: 'omit',
          });
        };
        let r = await send(null);
        // During a flood the server asks for a proof of work (docs/overload.md): app.js solves
        // it in a Web Worker, showing its progress, and the same create goes again with it.
        const challenge = r.status === 429 ? await challengeOf(r.clone()) : null;
        const proof =
          challenge && window.sluicePow ? await window.sluicePow.solve(challenge) : null;
        if (proof) r = await send(proof);
        if (r.status !== 201) {
          say(problem, t('Not created: {why}', { why: await errorText(r) }), true);
          return;
        }
        const j = await r.json();
        created(j, sealed.key, !!body.burn, !!password.value);
      } catch (x) {
        say(
          problem,
          t('Not created: {why}', { why: x && x.message ? x.message : String(x) }),
          true,
        );
      } finally {
        button.disabled = false;
      }
    });
  }

  function linkRow(id, value, label) {
    const row = document.createElement('div');
    row.className = 'linkrow';
    const input = document.createElement('input');
    input.id = id;
    input.readOnly = true;
    input.value = value;
    input.setAttribute('aria-label', label);
    row.appendChild(input);
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.textContent = t('Copy');
    copy.setAttribute('aria-label', t('Copy: {what}', { what: label }));
    copy.addEventListener('click', function () {
      input.select();
      const done = function () {
        copy.textContent = t('Copied');
        setTimeout(function () {
          copy.textContent = t('Copy');
        }, 1500);
      };
      if (navigator.clipboard && window.isSecureContext)
        navigator.clipboard.writeText(value).then(done, function () {});
      else {
        try {
          document.execCommand('copy');
          done();
        } catch {
          /* the link stays selected */
        }
      }
    });
    row.appendChild(copy);
    return row;
  }
  function created(j, key, burn, withPassword) {
    const link = j.url + '#' + key;
    const remove = new URL(
      '/delete/' + j.id + '?token=' + encodeURIComponent(j.delete_token),
      j.url,
    ).href;
    const box = document.createElement('section');
    box.className = 'notice';
    box.id = 'created';
    const h = document.createElement('h1');
    h.textContent = burn
      ? t('Encrypted paste created: burns after reading')
      : t('Encrypted paste created');
    box.appendChild(h);
    const p = document.createElement('p');
    p.textContent =
      t('Share this whole link: the key after # opens it, and the server never had it.') +
      (withPassword ? ' ' + t('Send the password another way.') : '') +
      (burn ? ' ' + t('Opening it yourself burns it.') : '');
    box.appendChild(p);
    box.appendChild(linkRow('share-link', link, t('Link to this paste, with its key')));
    const d = document.createElement('p');
    d.textContent = t('Delete link, shown only this once:');
    box.appendChild(d);
    box.appendChild(linkRow('delete-link', remove, t('Delete link')));
    if (!burn) {
      const a = document.createElement('a');
      a.className = 'button';
      a.id = 'open-created';
      a.href = link;
      a.textContent = t('Open it');
      box.appendChild(a);
    }
    form.hidden = true;
    form.reset();
    form.parentNode.insertBefore(box, form);
    // Its QR code, drawn here from the link with its key (/static/qr.js).
    if (window.sluiceShowQr) window.sluiceShowQr(document.getElementById('share-link'));
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
    document.getElementById('decrypted-meta').textContent = t(
      'Decrypted in this browser: {size} bytes',
      { size: bytes.length },
    );
    const copy = document.getElementById('copy');
    copy.addEventListener('click', function () {
      const done = function () {
        copy.textContent = t('Copied');
        setTimeout(function () {
          copy.textContent = t('Copy');
        }, 1500);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () {
          copy.textContent = t('Copy failed');
        });
      } else {
        const t = document.createElement('textarea');
        t.value = text;
        t.style.position = 'fixed';
        t.style.opacity = '0';
        document.body.appendChild(t);
        t.select();
        try {
          document.execCommand('copy');
          done();
        } catch {
          copy.textContent = t('Copy failed');
        }
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
        say(status, t('Enter the password to decrypt this paste.'), false);
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
      fail(
        x instanceof CryptError
          ? t('Cannot decrypt this paste: {why}', { why: x.message })
          : t('Cannot decrypt this paste: {why}', { why: x && x.message ? x.message : String(x) }),
      );
    }
  }
  async function fetchEnvelope(url, method) {
    const r = await fetch(url, {
      method: method,
      headers: { Accept: 'application/json' },
      credentials: 'omit',
      cache: 'no-store',
    });
    if (r.status !== 200) throw new Error(await errorText(r));
    return r.text();
  }
  async function start(url, method) {
    say(status, t('Decrypting in this browser…'), false);
    try {
      envelope = await fetchEnvelope(url, method);
    } catch (x) {
      fail(t('Cannot fetch this paste: {why}', { why: x.message }));
      return;
    }
    await attempt(null);
  }
  unlock.addEventListener('submit', function (ev) {
    ev.preventDefault();
    attempt(pw.value);
  });
  if (!key) {
    fail(
      t(
        'This link has no key (the part after #), so the paste cannot be decrypted. Ask whoever shared it for the whole link.',
      ),
    );
    return;
  }
  if (!window.crypto || !crypto.subtle) {
    fail(
      t(
        'This browser has no WebCrypto here (it needs a secure context: https or localhost), so the paste cannot be decrypted.',
      ),
    );
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
