-- wrk script: POST unique 10 KB UTF-8 pastes to /api/v1/pastes, as a raw body (FORMAT=raw, the
-- default) or as the JSON create (FORMAT=json: {"content": ...} with Content-Type
-- application/json), the same text either way, and count the statuses. The text has newlines and
-- multi-byte characters, so the JSON form carries escapes (\n) as pastebinit's would.
-- Prints "status <code> <count>" and "non_201 <count>" lines in done().

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

function json_escape(s)
  return (s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n'))
end
statuses = {}

function init(args)
  statuses = {}
  math.randomseed(os.time() * 1000 + (tid or 0))
  local unit = "The quick brown fox — naïve café, \"Grüße\", 日本語, ✓ ok 🚀\n"
  local parts, len = {}, 0
  while len < body_bytes do
    table.insert(parts, unit)
    len = len + #unit
  end
  local text = table.concat(parts)
  local room = body_bytes - 64
  local cut = room
  while cut > 0 and text:byte(cut + 1) and text:byte(cut + 1) >= 0x80 and text:byte(cut + 1) < 0xC0 do
    cut = cut - 1
  end
  filler = text:sub(1, cut) .. string.rep(".", room - cut)
  -- Escaped once here, not per request: wrk shares the machine's cores with the server, and the
  -- client's work must not be what the JSON column measures.
  escaped_filler = json_escape(filler)
end

function request()
  counter = counter + 1
  local header = string.format("wrk thread %03d request %012d random %010d", tid or 0, counter,
                               math.random(0, 2147483646))
  header = header .. string.rep(" ", 63 - #header) .. "\n"
  local text = header .. filler
  local body, ctype = text, "text/plain; charset=utf-8"
  if format == "json" then
    -- The header line is plain ASCII ending in a newline: only that needs escaping.
    body = '{"content": "' .. header:sub(1, -2) .. '\\n' .. escaped_filler .. '", "ttl": "1d"}'
    ctype = "application/json"
  end
  return wrk.format("POST", "/api/v1/pastes",
                    { ["Content-Type"] = ctype, ["Content-Length"] = tostring(#body) }, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total, non201 = {}, 0
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
    if code ~= 201 then non201 = non201 + total[code] end
  end
  io.write(string.format("non_201 %d\n", non201))
end
