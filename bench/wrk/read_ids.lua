-- wrk script: GET /raw/{id} for ids read from a file (one a line), in random order, and count the
-- statuses. Usage: wrk ... -s bench/wrk/read_ids.lua URL -- IDS_FILE
-- Prints "status <code> <count>" lines and "non_200 <count>" in done(); the run script parses them.

local threads = {}
local thread_seq = 0
local ids = {}
statuses = {}  -- global: done() reads it through thread:get

function setup(thread)
  thread_seq = thread_seq + 1
  thread:set("tid", thread_seq)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
  math.randomseed(os.time() * 1000 + (tid or 0))
  for line in io.lines(args[1]) do
    if #line > 0 then table.insert(ids, line) end
  end
  if #ids == 0 then error("no ids in " .. tostring(args[1])) end
end

function request()
  return wrk.format("GET", "/raw/" .. ids[math.random(1, #ids)])
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total, non200 = {}, 0
  for _, thread in ipairs(threads) do
    for code, n in pairs(thread:get("statuses") or {}) do
      total[code] = (total[code] or 0) + n
    end
  end
  local codes = {}
  for code in pairs(total) do table.insert(codes, code) end
  table.sort(codes)
  for _, code in ipairs(codes) do
    io.write(string.format("status %d %d\n", code, total[code]))
    if code ~= 200 then non200 = non200 + total[code] end
  end
  io.write(string.format("non_200 %d\n", non200))
end
