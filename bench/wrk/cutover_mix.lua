-- wrk script for bench/cutover.py: a server's ordinary load while a copy runs beside it. Each
-- request is, with probability CREATE_SHARE (default 0.1), a create of a small body (100 to 1,000
-- bytes), else GET /raw/{id} of an id drawn uniformly from IDS (one id a line, the first word).
-- MODE=fill: creates only, bodies of 100 to 400 bytes (the 1-million-paste store's filler).
-- statuses.lua sits beside this script, wherever wrk is run from.
package.path = package.path .. ";" .. (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua"
local statuses = require("statuses")

local threads = {}
setup = statuses.numbered(threads)

local mode = os.getenv("MODE") or "mix"
local share = tonumber(os.getenv("CREATE_SHARE") or "0.1")
local ids = {}
local filler = string.rep("the quick brown fox jumps over the lazy dog; ", 30)

function init(args)
  math.randomseed(os.time() * 1000 + tid)
  if mode == "fill" then return end
  local path = os.getenv("IDS")
  assert(path, "IDS is required")
  for line in io.lines(path) do table.insert(ids, line:match("^(%S+)")) end
  assert(#ids > 0, "IDS is empty")
end

local function create(low, high)
  local size = math.random(low, high)
  local body = string.format("cutover %d %d\n", tid, math.random(0, 1e9))
  body = body .. filler:sub(1, size - #body)
  return wrk.format("POST", "/api/v1/pastes",
                    { ["Content-Type"] = "text/plain", ["Content-Length"] = tostring(#body) }, body)
end

function request()
  if mode == "fill" then return create(100, 400) end
  if math.random() < share then return create(100, 1000) end
  return wrk.format("GET", "/raw/" .. ids[math.random(#ids)])
end

function response(status, headers, body)
  statuses.count(status)
end

function done(summary, latency, requests)
  statuses.report(threads, 200)
end
