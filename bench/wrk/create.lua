-- wrk script: POST unique-ish 10 KB UTF-8 bodies to /api/v1/pastes and count the statuses.
-- Every body is exactly BODY_BYTES bytes (default 10240): a fixed-width ASCII header naming the
-- wrk thread, a per-thread counter and a random number, then UTF-8 text (with multi-byte
-- characters) cut on a character boundary and padded with ASCII to the exact length.
-- FORMAT=json sends the same text as the JSON create ({"content": ...}, Content-Type
-- application/json), escapes and all, as pastebinit's would (bench/run_clients_bench.sh).
-- CORPUS=FILE sends, instead of that one text, a window of FILE at a random place per request (cut
-- on character boundaries, padded to the exact length): real text, as compressible as pastes are
-- (bench/run_create_bench.sh builds one from the repository's own sources). Raw format only.
-- AUTHORIZATION=VALUE sends that Authorization header with every create (a creator token:
-- "Bearer slt_..."); RANDOM_BEARER=1 sends a fresh random, well-formed, unknown creator token with
-- each (the stranger's flood of bearer tokens; bench/run_tokens_bench.sh).
-- STOP_AFTER (below) ends a run early. Prints "status <code> <count>" lines and "non_201 <count>" in done(); the run script parses them.

-- statuses.lua sits beside this script, wherever wrk is run from.
package.path = package.path .. ";" .. (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua"
local statuses = require("statuses")

local body_bytes = tonumber(os.getenv("BODY_BYTES") or "10240")
local format = os.getenv("FORMAT") or "raw"
local threads = {}
setup = statuses.numbered(threads)

local filler, escaped_filler
local counter = 0
local corpus_path = os.getenv("CORPUS") or ""
local authorization = os.getenv("AUTHORIZATION") or ""
local random_bearer = os.getenv("RANDOM_BEARER") == "1"
local base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

local function random_token()
  local chars = {}
  for i = 1, 43 do
    local k = math.random(1, 64)
    chars[i] = base64url:sub(k, k)
  end
  return "Bearer slt_" .. table.concat(chars)
end
local corpus

local function json_escape(s)
  return (s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n'))
end

function init(args)
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
  if corpus_path ~= "" then
    assert(format == "raw", "CORPUS works with FORMAT=raw only")
    local f = assert(io.open(corpus_path, "rb"))
    corpus = f:read("a")
    f:close()
    assert(#corpus > 2 * body_bytes, "CORPUS must be at least twice BODY_BYTES long")
  end
end

local function is_continuation(byte) return byte and byte >= 0x80 and byte < 0xC0 end

-- A window of the corpus `room` bytes long at a random place, on character boundaries, padded.
local function corpus_window(room)
  local first = math.random(1, #corpus - room)
  while is_continuation(corpus:byte(first)) do first = first + 1 end
  local last = first + room - 1
  while is_continuation(corpus:byte(last + 1)) do last = last - 1 end
  local text = corpus:sub(first, last)
  return text .. string.rep(".", room - #text)
end

function request()
  counter = counter + 1
  local header = string.format("wrk thread %03d request %012d random %010d", tid or 0, counter,
                               math.random(0, 2147483646))
  header = header .. string.rep(" ", 63 - #header) .. "\n"
  local body, ctype = header .. (corpus and corpus_window(body_bytes - 64) or filler),
                      "text/plain; charset=utf-8"
  if format == "json" then
    -- The header line is plain ASCII ending in a newline: only that needs escaping.
    body = '{"content": "' .. header:sub(1, -2) .. '\\n' .. escaped_filler .. '", "ttl": "1d"}'
    ctype = "application/json"
  end
  local headers = { ["Content-Type"] = ctype, ["Content-Length"] = tostring(#body) }
  if random_bearer then
    headers["Authorization"] = random_token()
  elseif authorization ~= "" then
    headers["Authorization"] = authorization
  end
  return wrk.format("POST", "/api/v1/pastes", headers, body)
end

-- STOP_AFTER=N: each wrk thread stops after N answers (bench/wal_pages.py, which counts what
-- landed from the database: the requests still in flight then are not counted here).
local stop_after = tonumber(os.getenv("STOP_AFTER") or "0")
local answered = 0

function response(status, headers, body)
  statuses.count(status)
  answered = answered + 1
  if stop_after > 0 and answered >= stop_after then wrk.thread:stop() end
end

function done(summary, latency, requests)
  statuses.report(threads, 201)
  io.write(string.format("body_bytes %d\n", body_bytes))
end
