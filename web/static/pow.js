// sluice: the proof of work's search (docs/overload.md, "Proof of work"), run as Web Workers by
// app.js so that the page stays responsive while it runs. The challenge is ALTCHA's: find the
// number N in [0, maxnumber] whose SHA-256 of salt + N (decimal) is `challenge`. Each worker is
// given a part of that range ({challenge, from, to}), so a phone's cores search side by side.
// Nothing here is a message a person reads: the page says what is happening, in its language.
'use strict';
(function () {
  // crypto.subtle answers each digest through a promise, so one at a time spends most of the
  // search waiting on its round trip: a batch in flight together keeps the hashing busy.
  const kBatch = 256;
  // How often the page hears how far the search has got: often enough for a progress bar that
  // moves, rarely enough that the messages cost nothing beside the hashing.
  const kProgressMs = 100;

  function bytesOfHex(hex) {
    const out = new Uint8Array(hex.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.substr(i * 2, 2), 16);
    return out;
  }
  function same(buffer, target) {
    const got = new Uint8Array(buffer);
    for (let i = 0; i < target.length; i++) if (got[i] !== target[i]) return false;
    return true;
  }

  async function search(part) {
    const started = performance.now();
    const encoder = new TextEncoder();
    const target = bytesOfHex(String(part.challenge.challenge).toLowerCase());
    const salt = String(part.challenge.salt);
    const last = Number(part.to);
    let told = started;
    for (let from = Number(part.from); from <= last; from += kBatch) {
      const to = Math.min(last, from + kBatch - 1);
      const digests = [];
      for (let n = from; n <= to; n++) {
        digests.push(crypto.subtle.digest('SHA-256', encoder.encode(salt + n)));
      }
      const found = await Promise.all(digests);
      for (let i = 0; i < found.length; i++) {
        if (same(found[i], target)) {
          return { number: from + i, ms: performance.now() - started };
        }
      }
      const now = performance.now();
      if (now - told >= kProgressMs) {
        told = now;
        self.postMessage({ searched: to + 1 - Number(part.from) });
      }
    }
    return { number: null, ms: performance.now() - started };
  }

  self.onmessage = function (event) {
    search(event.data).then(
      function (result) {
        self.postMessage(result);
      },
      function (error) {
        // No SubtleCrypto (a page served over plain HTTP from another host), or a challenge
        // that is not one: the page then sends the form as it is and gets the server's 429.
        self.postMessage({ error: String(error && error.message ? error.message : error) });
      },
    );
  };
})();
