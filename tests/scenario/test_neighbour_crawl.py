"""Scenario 5: a neighbour crawls cold ids while one paste is viral (docs/overload.md, "Read", noisy neighbours).

Many client keys request distinct cold ids (each one a metadata miss: a "fill"), one greedy key
crawls fast on its own, and one hot id is read heavily; creates keep arriving. Metadata reads take
100 ms (fault injection; the meta-get timeout is raised to 200 ms so they succeed slowly), so the
crawl wants more concurrent fills than the cap allows. Asserted: concurrent primary fills never
exceed --fill-cap (sluice_pool_peak{pool="fill"}), the greedy key gets at most its per-client share
(fill_cap_per_client / latency completions a second), the hot id's reads stay 200 (cache hits take no
slot), and creates keep committing.

Run: cd tests/scenario && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_neighbour_crawl
"""

import secrets
import string
import unittest

import loadgen as lg
from loadgen import Request, Stream, client_ip, pick, xff
from promtext import counter_delta, metric

FILL_CAP = 4
PER_CLIENT = 2
FILL_LATENCY = 0.100
CRAWL_RATE = pick(80.0, 120.0)      # 80/s x 100 ms = 8 fills wanted, cap 4
GREEDY_RATE = 30.0                  # one key: 3 fills wanted, share 2
HOT_RATE = pick(40.0, 60.0)
CREATE_RATE = 3.0
DURATION = pick(8.0, 40.0)
ALPHABET = string.ascii_letters + string.digits


def cold_id(i):
    """A valid paste id that exists nowhere: every read of it is a metadata miss."""
    return "".join(secrets.choice(ALPHABET) for _ in range(12))


class NeighbourCrawlTest(lg.ScenarioTestCase):

    def test_crawl_is_held_by_the_fill_cap_while_hot_reads_and_creates_continue(self):
        # The creates show that the crawl takes none of their slots, not how fast a disk commits:
        # beside a writer syncing its files (the flake hunt's load), a commit took over the 1 s
        # put timeout. Their timeouts are test_slow_bucket's and test_primary_blip's subject.
        s = self.start_server(fill_cap=FILL_CAP, fill_cap_per_client=PER_CLIENT,
                              meta_get_timeout="200ms", read_budget="1s", put_timeout="10s",
                              insert_timeout="5s", create_budget="15s")
        hot = s.create_ok("the viral paste\n" * 100)["id"]
        self.assertEqual(s.get(f"/raw/{hot}").status, 200)
        before = self.scrape(s)
        self.faults(s, f"meta.get:latency={int(FILL_LATENCY * 1000)}ms")
        streams = [
            Stream("crawl", CRAWL_RATE, DURATION, lambda i: Request(
                "GET", f"/raw/{cold_id(i)}", xff(client_ip(i % 200, 50)))),
            Stream("greedy", GREEDY_RATE, DURATION, lambda i: Request(
                "GET", f"/raw/{cold_id(i)}", xff("10.50.99.99"))),
            Stream("hot", HOT_RATE, DURATION, lambda i: Request(
                "GET", f"/raw/{hot}", xff(client_ip(i, 51)))),
            Stream("create", CREATE_RATE, DURATION, lambda i: Request(
                "POST", "/api/v1/pastes", xff(client_ip(i, 52)), f"crawl-time create {i}\n")),
        ]
        # Judged only on time: arrivals that bunch behind a late generator trip the per-client
        # origin budget (429 origin_get_ip), which the planned rate never reaches, so a late run
        # is the harness's failure, not the server's (bench/results/flake-hunt.md, run 30).
        run, sampler = self.load(s, streams, sample_every=0.1)
        self.faults(s, "")
        after = self.scrape(s)
        crawl, greedy = run.records("crawl"), run.records("greedy")
        hot_reads, creates = run.records("hot"), run.records("create")
        peak = metric(after, "sluice_pool_peak", pool="fill")
        sampled = sampler.max("sluice_pool_in_use", pool="fill")
        shed = counter_delta(before, after, "sluice_admission_rejections_total", reason="fill_cap")
        fills = counter_delta(before, after, "sluice_store_calls_total", target="meta.get")
        greedy_rate = lg.completions_per_second(greedy, 404, run.t0 + 1, run.t0 + DURATION)
        crawl_through = lg.completions_per_second(crawl + greedy, 404, run.t0 + 1, run.t0 + DURATION)
        lg.report("neighbour_crawl", {
            "crawl": lg.describe(crawl), "greedy_key": lg.describe(greedy),
            "hot": lg.describe(hot_reads), "creates": lg.describe(creates),
            "fill_peak": peak, "fill_in_use_sampled_max": sampled,
            "fill_cap_rejections": shed, "fills_reaching_store": fills,
            "misses_answered_per_s": round(crawl_through, 1),
            "greedy_misses_answered_per_s": round(greedy_rate, 1),
            "hot_p99_ms": round(1000 * lg.percentile(lg.latencies(hot_reads), 99), 1),
            "harness": run.schedule_summary(),
        }, predicted={"fill_peak": f"<= {FILL_CAP}",
                      "misses_answered_per_s": f"<= {FILL_CAP / FILL_LATENCY:.0f} (cap / latency)",
                      "greedy_misses_answered_per_s": f"<= {PER_CLIENT / FILL_LATENCY:.0f}",
                      "hot": "all 200", "creates": "all 201"})

        # The crawl sees 404 (id not found) or 503 (shed), never a 200 and never an error page.
        self.assertStatuses(crawl + greedy, {404, 503}, "cold crawl")
        self.assertEqual(set(lg.by_reason([r for r in crawl + greedy if r.status == 503])),
                         {"fill_cap"})
        self.assertGreater(shed, 0, "the fill cap was never reached: the scenario tested nothing")
        # Concurrent primary fills never exceed the cap.
        self.assertLessEqual(peak, FILL_CAP)
        self.assertLessEqual(sampled, FILL_CAP)
        # Little's law through the cap and through the greedy key's share (15% for timing noise).
        self.assertLessEqual(crawl_through, 1.15 * FILL_CAP / FILL_LATENCY)
        self.assertLessEqual(greedy_rate, 1.15 * PER_CLIENT / FILL_LATENCY)
        # The viral paste and the commit path do not notice.
        self.assertStatuses(hot_reads, {200}, "reads of the hot id")
        self.assertStatuses(creates, {201}, "creates during the crawl")


if __name__ == "__main__":
    unittest.main()
