-- wrk script: GET /raw/{id} for ids read from a file (one a line), in random order, and count the
-- statuses. Usage: wrk ... -s bench/wrk/read_ids.lua URL -- IDS_FILE
-- Prints "status <code> <count>" lines and "non_200 <count>" in done(); the run script parses them.

-- statuses.lua sits beside this script, wherever wrk is run from.
package.path = package.path .. ";" .. (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua"
local statuses = require("statuses")

local threads = {}
setup = statuses.numbered(threads)
local ids = {}

function init(args)
  math.randomseed(os.time() * 1000 + (tid or 0))
  for line in io.lines(args[1]) do
    if #line > 0 then table.insert(ids, line) end
  end
  if #ids == 0 then error("no ids in " .. tostring(args[1])) end
end

function request()
  return wrk.format("GET", "/raw/" .. ids[math.random(1, #ids)])
end

function response(status, headers, body) statuses.count(status) end

function done(summary, latency, requests) statuses.report(threads, 200) end
