-- wrk script: POST unique-ish 10 KB UTF-8 bodies to /api/v1/pastes and count the statuses.
-- Every body is exactly BODY_BYTES bytes (default 10240): a fixed-width ASCII header naming the
-- wrk thread, a per-thread counter and a random number, then UTF-8 text (with multi-byte
-- characters) cut on a character boundary and padded with ASCII to the exact length.
-- FORMAT=json sends the same text as the JSON create ({"content": ...}, Content-Type
-- application/json), escapes and all, as pastebinit's would (bench/run_clients_bench.sh).
-- STOP_AFTER (below) ends a run early. Prints "status <code> <count>" lines and "non_201 <count>" in done(); the run script parses them.

local body_bytes = tonumber(os.getenv("BODY_BYTES") or "10240")
local format = os.getenv("FORMAT") or "raw"
local threads = {}
local thread_seq = 0

function setup(thread)
  thread_seq = thread_seq + 1
  thread:set("tid", thread_seq)
  table.insert(threads, thread)
end

local filler, escaped_filler
local counter = 0

local function json_escape(s)
  return (s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n'))
end
statuses = {}  -- global: done() reads it through thread:get

function init(args)
  statuses = {}
  math.randomseed(os.time() * 1000 + (tid or 0))
  -- UTF-8 text: ASCII, Latin-1 supplement (2 bytes), BMP symbols (3 bytes), emoji (4 bytes).
  local unit = "The quick brown fox — naïve café, \"Grüße\", 日本語のテキスト, ✓ ok 🚀\n"
  local parts, len = {}, 0
  while len < body_bytes do
    table.insert(parts, unit)
    len = len + #unit
  end
  local text = table.concat(parts)
  -- Cut at the last character boundary that leaves room for the header; pad with ASCII.
  local room = body_bytes - 64
  local cut = room
  while cut > 0 and text:byte(cut + 1) and text:byte(cut + 1) >= 0x80 and text:byte(cut + 1) < 0xC0 do
    cut = cut - 1
  end
  filler = text:sub(1, cut) .. string.rep(".", room - cut)
  -- Escaped once here, not per request: wrk shares the machine's cores with the server, and the
  -- client's work must not be what the JSON figure measures.
  escaped_filler = json_escape(filler)
end

function request()
  counter = counter + 1
  local header = string.format("wrk thread %03d request %012d random %010d", tid or 0, counter,
                               math.random(0, 2147483646))
  header = header .. string.rep(" ", 63 - #header) .. "\n"
  local body, ctype = header .. filler, "text/plain; charset=utf-8"
  if format == "json" then
    -- The header line is plain ASCII ending in a newline: only that needs escaping.
    body = '{"content": "' .. header:sub(1, -2) .. '\\n' .. escaped_filler .. '", "ttl": "1d"}'
    ctype = "application/json"
  end
  return wrk.format("POST", "/api/v1/pastes",
                    { ["Content-Type"] = ctype, ["Content-Length"] = tostring(#body) }, body)
end

-- STOP_AFTER=N: each wrk thread stops after N answers (bench/wal_pages.py, which counts what
-- landed from the database: the requests still in flight then are not counted here).
local stop_after = tonumber(os.getenv("STOP_AFTER") or "0")
local answered = 0

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  answered = answered + 1
  if stop_after > 0 and answered >= stop_after then wrk.thread:stop() end
end

function done(summary, latency, requests)
  local total, non201 = {}, 0
  for _, thread in ipairs(threads) do
    local s = thread:get("statuses")
    for code, n in pairs(s or {}) do
      total[code] = (total[code] or 0) + n
    end
  end
  local codes = {}
  for code in pairs(total) do table.insert(codes, code) end
  table.sort(codes)
  for _, code in ipairs(codes) do
    io.write(string.format("status %d %d\n", code, total[code]))
    if code ~= 201 then non201 = non201 + total[code] end
  end
  io.write(string.format("non_201 %d\n", non201))
  io.write(string.format("body_bytes %d\n", body_bytes))
end
