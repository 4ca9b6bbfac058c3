// sluice: a QR code of a paste's share link, for reading it with a phone. It is drawn here, in the
// browser, from the whole link: an encrypted paste's key (after '#') never reaches the server.
// The encoder is Debian's node-qrcode-generator (the global `qrcode`, /static/qrcode.js). Without
// JavaScript the page shows the link alone.
/* global qrcode */
'use strict';
(function () {
  // The page's messages in its language: a JSON data block the server puts in the page
  // (src/http/pages.cc, docs/translations.md); without one, the English msgids themselves.
  const messages = (function () {
    const block = document.getElementById('i18n-qr');
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

  if (typeof qrcode !== 'function') return;
  // The link's bytes as UTF-8 (the library's default keeps only each character's low byte).
  qrcode.stringToBytes = qrcode.stringToBytesFuncs['UTF-8'];

  const QUIET_ZONE = 4; // modules of white around the code, as ISO/IEC 18004 asks
  const SIZE = 200; // CSS pixels, about the width a phone camera reads from a screen

  // A canvas showing `text` as a QR code (error correction M), or null when it does not fit one.
  function draw(text) {
    let code;
    try {
      code = qrcode(0, 'M');
      code.addData(text, 'Byte');
      code.make();
    } catch {
      return null;
    }
    const modules = code.getModuleCount() + 2 * QUIET_ZONE;
    // Whole device pixels per module, so no module's edge is blurred by scaling.
    const scale = Math.max(1, Math.floor((SIZE * (window.devicePixelRatio || 1)) / modules));
    const canvas = document.createElement('canvas');
    canvas.width = canvas.height = modules * scale;
    canvas.style.width = canvas.style.height =
      (modules * scale) / (window.devicePixelRatio || 1) + 'px';
    const ctx = canvas.getContext('2d');
    // Dark on light whatever the page's colour scheme: readers expect it, some need it.
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = '#000000';
    for (let row = 0; row < code.getModuleCount(); row++) {
      for (let col = 0; col < code.getModuleCount(); col++) {
        if (code.isDark(row, col)) {
          ctx.fillRect((col + QUIET_ZONE) * scale, (row + QUIET_ZONE) * scale, scale, scale);
        }
      }
    }
    return canvas;
  }

  // Puts the QR code of the link in `input` (a share link's field) after the row holding it.
  function show(input) {
    if (!input) return;
    const canvas = draw(input.value);
    if (!canvas) return;
    canvas.id = input.id + '-qr';
    canvas.className = 'qr';
    canvas.setAttribute('role', 'img');
    canvas.setAttribute('aria-label', t('QR code of the link'));
    const row = input.closest('.linkrow') || input;
    row.after(canvas);
  }

  // The created pages the server made hold their link; crypt.js calls this for the link it makes.
  window.sluiceShowQr = show;
  show(document.getElementById('share-link'));
})();
