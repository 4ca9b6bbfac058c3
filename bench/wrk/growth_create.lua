-- wrk script for bench/growth.py: creates whose sizes and lifetimes look like a public pastebin's.
-- Sizes (bytes, log-uniform within each band): 75% 64 B-2 KiB, 23% 2-16 KiB, 1.9% 16-128 KiB,
-- 0.1% 128 KiB-1 MiB (mean about 3.4 KB, median about 1 KB). Each body is a window of CORPUS (ASCII
-- text, the repository's own sources: as compressible as real pastes are), at a random offset.
-- Lifetimes: 5% ttl=10m (the sweeper's steady work during a fill), 10% ttl=30d (the pastes
-- bench/growth.py makes expire at a checkpoint, to measure a sweep of a backlog), the rest the
-- default. A body starts with the line "growth OFFSET\n" and goes on with the corpus from OFFSET,
-- so a read-back can check it byte for byte (wrk does not say which request an answer is for).
-- One answer in SAMPLE_EVERY (default 20) is written to SAMPLE_DIR/created-<thread>.txt as
-- "id token": the ids cold reads draw from and the tokens deletes spend.
-- statuses.lua sits beside this script, wherever wrk is run from.
package.path = package.path .. ";" .. (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua"
local statuses = require("statuses")

local threads = {}
setup = statuses.numbered(threads)

local corpus
local sample_every = tonumber(os.getenv("SAMPLE_EVERY") or "20")
local sample_file
local answered = 0

local bands = {
  {0.75, 64, 2048}, {0.98, 2048, 16384}, {0.999, 16384, 131072}, {1.0, 131072, 1048576},
}

local function draw_size()
  local u = math.random()
  for _, band in ipairs(bands) do
    if u < band[1] then
      return math.floor(math.exp(math.log(band[2]) + math.random() * math.log(band[3] / band[2])))
    end
  end
  return bands[1][2]
end

function init(args)
  math.randomseed(os.time() * 1000 + tid)
  local path = os.getenv("CORPUS")
  assert(path, "CORPUS is required")
  local f = assert(io.open(path, "rb"))
  corpus = f:read("a")
  f:close()
  assert(#corpus > 2 * 1048576, "CORPUS must be over 2 MiB")
  local dir = os.getenv("SAMPLE_DIR")
  if dir then sample_file = assert(io.open(string.format("%s/created-%d.txt", dir, tid), "a")) end
end

function request()
  local size = draw_size()
  local offset = math.random(0, #corpus - size)
  local head = string.format("growth %d\n", offset)
  local u, ttl = math.random(), ""
  if u < 0.05 then ttl = "?ttl=10m" elseif u < 0.15 then ttl = "?ttl=30d" end
  return wrk.format("POST", "/api/v1/pastes" .. ttl,
                    { ["Content-Type"] = "text/plain", ["Content-Length"] = tostring(size) },
                    head .. corpus:sub(offset + 1, offset + size - #head))
end

function response(status, headers, body)
  statuses.count(status)
  answered = answered + 1
  if status == 201 and sample_file and answered % sample_every == 0 then
    local id = body:match('"id":"([%w]+)"')
    local token = body:match('"delete_token":"([^"]+)"')
    if id and token then
      sample_file:write(id, " ", token, "\n")
      sample_file:flush()
    end
  end
end

function done(summary, latency, requests) statuses.report(threads, 201) end
