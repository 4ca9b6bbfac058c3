-- wrk script of bench/run_shed_bench.sh: the same 10 KB POSTs and status counts as create.lua,
-- plus wrk's own latency percentiles up to p99.9 (wrk --latency prints only 50/75/90/99).
-- wrk times every answer together: it cannot tell a 503's latency from a 201's, and starts its
-- clock after connect.
dofile((os.getenv("BENCH_DIR") or "bench") .. "/wrk/create.lua")

local create_done = done

function done(summary, latency, requests)
  create_done(summary, latency, requests)
  for _, p in ipairs({50, 90, 99, 99.9, 99.99}) do
    io.write(string.format("latency_pct %s %.3f\n", tostring(p), latency:percentile(p) / 1000))
  end
  io.write(string.format("latency_max %.3f\n", latency.max / 1000))
  io.write(string.format("latency_mean %.3f\n", latency.mean / 1000))
  io.write(string.format("answers %d\n", summary.requests))
end
