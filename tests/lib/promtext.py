"""The one reader of sluice's /metrics (Prometheus text format) for tests, benches and tools.

Standard library only; imports nothing else of tests/lib. `parse_metrics(text)` gives
{(name, frozenset(labels.items())): value}; the lookups below read that dict:

- `metric(m, name, **labels)`: the one series with exactly these labels, 0 when absent (a counter
  not yet incremented);
- `metric_sum(m, name, **labels)`: the sum of every series of `name` whose labels include these;
- `counter_delta(before, after, name, **labels)`: how much that sum grew between two scrapes.

Whether the text is valid exposition format is promtool's call
(tests/integration/test_metrics_format.py), not this parser's: it reads only what it needs.
"""

import re

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise AssertionError(f"unparsable metrics line: {line!r}")
        labels = frozenset(_LABEL.findall(m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def metric(metrics, name, **labels):
    """Value of one series, 0 when absent (a counter not yet incremented)."""
    return metrics.get((name, frozenset(labels.items())), 0.0)


def metric_sum(metrics, name, **labels):
    """Sum of every series of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in metrics.items() if n == name and want <= set(ls))


def counter_delta(before, after, name, **labels):
    """How much the series of `name` matching `labels` (summed) grew between two scrapes."""
    return metric_sum(after, name, **labels) - metric_sum(before, name, **labels)
