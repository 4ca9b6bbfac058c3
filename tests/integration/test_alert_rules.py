"""The alert rules name what the server really exports.

deploy/prometheus/sluice.rules.yml is unit-tested by promtool against series it invents
(scripts/check-alert-rules.sh); a rule on a misspelt metric or label would pass those tests and
never fire in production. Here every metric the rules read, and every label they match on, is looked
up in the /metrics of a running server (with a shared cache, so the limiter's gauge exists), and the
two series this branch adds for them (body bytes stored, the configured plan) are checked to move.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_alert_rules
"""

import os
import re
import unittest

import yaml

from promtext import metric
from sluice_harness import RedisServer, SluiceTestCase, wait_until

RULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy",
                     "prometheus", "sluice.rules.yml")
SELECTOR = re.compile(r"\b(sluice_[a-z_]+)(\{([^}]*)\})?")
MATCHER = re.compile(r'([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def rule_selectors():
    """[(rule name, metric, [(label, op, value)])] for every metric selector in the rules."""
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    out = []
    for group in doc["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert") or rule.get("record")
            for m in SELECTOR.finditer(rule["expr"]):
                out.append((name, m.group(1), MATCHER.findall(m.group(3) or "")))
    return out


class AlertRulesTest(SluiceTestCase):
    def test_every_metric_and_label_in_the_rules_is_exported(self):
        redis = RedisServer().start()
        self.addCleanup(redis.stop)
        server = self.server(["--put-bytes-per-day-plan", "5e9"], cache=redis)
        before = server.metrics()
        body = "x" * 1234
        server.create_ok(body)
        # A response is counted once its write completes, which the client may see first
        # (tests/integration/test_api.py, counted).
        wait_until(lambda: metric(server.metrics(), "sluice_http_requests_total",
                                  route="create_api", status="201") >= 1,
                   message="the create counted")
        exported = server.metrics()
        families = {}
        for (name, labels) in exported:
            for suffix in HISTOGRAM_SUFFIXES:
                if name.endswith(suffix):
                    families.setdefault(name[: -len(suffix)], set())
            families.setdefault(name, set()).update(labels)

        selectors = rule_selectors()
        self.assertGreater(len(selectors), 10)
        for rule, name, matchers in selectors:
            with self.subTest(rule=rule, metric=name):
                self.assertIn(name, families, f"{rule} reads {name}, which /metrics lacks")
                series = families[name]
                for label, op, value in matchers:
                    values = {v for (k, v) in series if k == label}
                    self.assertTrue(values, f"{rule}: {name} has no label {label}")
                    # Values are checked only for labels whose series all exist from the start;
                    # a status or a reason appears once counted.
                    if label not in ("route", "pool", "dependency", "to"):
                        continue
                    if op == "=":
                        self.assertIn(value, values, f"{rule}: {name}{{{label}={value!r}}}")
                    elif op in ("=~", "!~"):
                        self.assertTrue(any(re.fullmatch(value, v) for v in values),
                                        f"{rule}: no {label} of {name} matches {value!r}")

        self.assertEqual(metric(exported, "sluice_plan_put_bytes_per_day"), 5e9)
        self.assertEqual(metric(exported, "sluice_blob_put_bytes_total")
                         - metric(before, "sluice_blob_put_bytes_total"), len(body))

    def test_without_a_plan_the_plan_is_zero(self):
        server = self.server()
        self.assertEqual(metric(server.metrics(), "sluice_plan_put_bytes_per_day"), 0)


if __name__ == "__main__":
    unittest.main()
