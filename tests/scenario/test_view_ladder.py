"""Scenario: views arrive faster than the highlighter can serve them (docs/overload.md, "The view", the ladder).

The highlighter gets 4 slots and every render takes 200 ms more (render_delay, test-only), so it
sustains about 4 / 0.2 s = 20 renders a second, of which the ladder admits 80% (the utilization
target leaves the slots idle time, so the planned shed rather than chance decides); the rendering cache is off so every view needs one.
Views arrive at 10/s (below capacity), then 60/s (three times capacity) for a few seconds, then 5/s.
The mix at 60/s: plain-text pastes, large pastes, and small code pastes read by 40 client keys
(X-Forwarded-For behind a trusted 127.0.0.1), each key several times.

Asserted, from each view's X-Sluice-Rung header and /metrics:
- no view waits for a slot: a shed view answers at once, a highlighted one in about one render time;
- the shed set is the predicted one: every plain-text and every large paste goes plain first, then a
  slice of client keys chosen by the stable hash (FNV-1a of the key, mod 100), lowest buckets first;
- a client key stays on one rung across its repeated views during the episode;
- the shed is released gradually after the load falls, and ends.

Run: cd tests/scenario && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_view_ladder
"""

import collections
import time
import unittest

import loadgen as lg
from loadgen import Request, Stream, client_ip, xff
from promtext import metric

SLOTS = 4
RENDER_DELAY = 0.200
UTILIZATION = 0.8
LARGE = 20_000
CALM_RATE, OVERLOAD_RATE, AFTER_RATE = 10.0, 60.0, 5.0
CALM, OVERLOAD, AFTER = 3.0, 6.0, 8.0
KEYS = 40
SETTLE = 1.5  # seconds into the overload before the window has seen it whole

CODE = "def add(a, b):\n    return a + b  # small and worth colouring\n"
PROSE = "Meeting notes. Bring the slides, and the coffee.\n" * 3
LARGE_CODE = "def f(x):\n    return x * 2\n" * (LARGE // 25 + 1)


def key_bucket(key):
    """The ladder's stable bucket of a client key (DegradationLadder::KeyBucket)."""
    h = 0xcbf29ce484222325
    for b in key.encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h % 100


def browser(address):
    """A browser's view request behind the balancer: only a browser gets the page (GET /{id} gives
    other clients the text)."""
    return {**xff(address), "Accept": "text/html"}


def rung_of(record):
    tag = record.header("x-sluice-rung") or ""
    parts = dict(p.strip().split("=", 1) for p in tag.split(";")[1:] if "=" in p)
    return tag.split(";")[0].strip(), parts.get("reason", ""), parts.get("cause", "")


class ViewLadderTest(lg.ScenarioTestCase):

    def test_overload_sheds_plain_then_large_then_a_stable_slice_and_releases(self):
        s = self.start_server(highlight_slots=SLOTS, render_delay=f"{int(RENDER_DELAY * 1000)}ms",
                              highlight_cache_bytes=0, large_paste_bytes=LARGE,
                              shed_release_rate=20, highlight_utilization=UTILIZATION)
        code = s.create_ok(CODE)["id"]
        prose = s.create_ok(PROSE)["id"]
        large = s.create_ok(LARGE_CODE)["id"]
        keys = [client_ip(i, 60) for i in range(KEYS)]

        def view(i):
            # 15% plain text, 15% large, 70% small code spread over the keys.
            slot = i % 20
            if slot < 3:
                return Request("GET", f"/{prose}", browser(client_ip(1000 + i, 61)),
                               tag=("prose", None))
            if slot < 6:
                return Request("GET", f"/{large}?lang=python", browser(client_ip(2000 + i, 62)),
                               tag=("large", None))
            key = keys[i % KEYS]
            return Request("GET", f"/{code}?lang=python", browser(key), tag=("code", key))

        streams = [
            Stream("calm", CALM_RATE, CALM, view),
            Stream("overload", OVERLOAD_RATE, OVERLOAD, view, offset=CALM),
            Stream("after", AFTER_RATE, AFTER, lambda i: Request(
                "GET", f"/{code}?lang=python", browser(keys[i % KEYS]),
                tag=("code", keys[i % KEYS])),
                offset=CALM + OVERLOAD),
        ]
        run, sampler = self.load(s, streams, sample_every=0.25)
        self.assertStatuses(run.records(), {200}, "views")

        # Below capacity nothing is shed.
        calm = run.records("calm")
        self.assertEqual({rung_of(r)[0] for r in calm}, {"highlighted"}, lg.describe(calm))

        overload = run.records("overload")
        start = min(r.due for r in overload)
        steady = [r for r in overload if r.due - start >= SETTLE]

        # No view waits for a slot: the plain rung answers at once, a render takes one render time.
        plain_latency = [r.latency for r in overload if rung_of(r)[0] == "plain"]
        lit_latency = [r.latency for r in overload if rung_of(r)[0] == "highlighted"]
        self.assertTrue(plain_latency and lit_latency)
        self.assertLess(lg.percentile(plain_latency, 99), RENDER_DELAY / 2,
                        "a shed view is answered before a render could even finish")
        self.assertLess(max(lit_latency), 2 * RENDER_DELAY,
                        "a highlighted view never queued behind another render")
        for r in overload:
            rung, reason, _ = rung_of(r)
            if rung == "plain":
                self.assertEqual(reason, "shed_for_load", r)

        # Plain-text and large pastes go first: all of them, once the overload is seen.
        for kind, cause in (("prose", "plain_text"), ("large", "large")):
            shown = collections.Counter(rung_of(r) for r in steady if r.tag[0] == kind)
            self.assertEqual(set(shown), {("plain", "shed_for_load", cause)}, (kind, shown))

        # Then a slice of client keys, lowest hash buckets first, each key on one rung.
        by_key = collections.defaultdict(collections.Counter)
        slots_full = 0
        small = [r for r in steady if r.tag[0] == "code"]
        for r in small:
            rung, _, cause = rung_of(r)
            if cause == "slots_full":
                slots_full += 1  # every slot busy at that instant: shed, but not by the slice
                continue
            by_key[r.tag[1]][rung] += 1
        self.assertLess(slots_full, 0.15 * len(small),
                        f"most sheds are planned, not slots found full ({slots_full}/{len(small)})")
        shed_keys = sorted(key_bucket(k) for k, c in by_key.items() if set(c) == {"plain"})
        lit_keys = sorted(key_bucket(k) for k, c in by_key.items() if set(c) == {"highlighted"})
        mixed = {k: dict(c) for k, c in by_key.items() if len(c) > 1}
        self.assertTrue(shed_keys, f"the overload reached the visitor slice: {dict(by_key)}")
        self.assertTrue(lit_keys, f"some visitors kept highlighting: {dict(by_key)}")
        self.assertLess(max(shed_keys), min(lit_keys),
                        f"the slice is the lowest buckets: shed {shed_keys}, lit {lit_keys}")
        self.assertLessEqual(len(mixed), 2,
                             f"a key stays on one rung across its views: flipped {mixed}")

        # How much went: Little's law on the measured service time.
        end_of_overload = max(r.due for r in overload)
        sustainable = sampler.value_at(end_of_overload, "sluice_view_sustainable_rate")
        lit_share = sum(1 for r in steady if rung_of(r)[0] == "highlighted") / len(steady)
        predicted = min(1.0, UTILIZATION * sustainable / OVERLOAD_RATE)
        self.assertAlmostEqual(lit_share, predicted, delta=0.15,
                               msg=f"highlighted {lit_share:.2f} of views, Little's law says "
                                   f"{predicted:.2f} (sustainable {sustainable:.1f}/s)")

        # Released gradually after the load falls, and ended.
        shed = sampler.series("sluice_view_shed_percent")
        peak = max(v for _, v in shed)
        self.assertGreater(peak, 50)
        between = [v for t, v in shed if t > end_of_overload and 1 < v < peak - 10]
        self.assertTrue(between, f"the shed fell in steps, not at once: {shed}")
        after = run.records("after")
        tail = [r for r in after if r.due - min(x.due for x in after) >= AFTER / 2]
        self.assertEqual({rung_of(r)[0] for r in tail}, {"highlighted"}, lg.describe(tail))
        self.assertEqual(metric(self.scrape(s), "sluice_view_shed_percent"), 0)

        lg.report("view ladder", {
            "sustainable_per_s": sustainable,
            "highlighted_share": lit_share,
            "predicted_share": predicted,
            "shed_key_buckets": shed_keys,
            "lit_key_buckets": lit_keys,
            "slots_full": slots_full,
        })


if __name__ == "__main__":
    unittest.main()
