-- wrk script for bench/growth.py: GET /raw/{id}, the ids drawn uniformly from IDS (one "id ..." a
-- line, the first word taken), or MODE=absent: ids of the same shape that nobody stored (12
-- base62 characters, as a crawler guesses them), each a 404. MODE=delete: DELETE each sampled
-- paste once with its token (the second word), each thread its own share of the lines, stopping
-- when its share is spent.
-- statuses.lua sits beside this script, wherever wrk is run from.
package.path = package.path .. ";" .. (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua"
local statuses = require("statuses")

local threads = {}
setup = statuses.numbered(threads)

local mode = os.getenv("MODE") or "present"
local ids, tokens, next_line = {}, {}, 1
local alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

function init(args)
  math.randomseed(os.time() * 1000 + tid)
  if mode == "absent" then return end
  local n, nthreads = 0, tonumber(os.getenv("THREADS") or "2")
  local path = os.getenv("IDS")
  assert(path, "IDS is required")
  for line in io.lines(path) do
    n = n + 1
    local id, token = line:match("^(%S+)%s+(%S+)")
    if mode ~= "delete" or n % nthreads == tid - 1 then
      table.insert(ids, id)
      table.insert(tokens, token)
    end
  end
  assert(#ids > 0, "no ids")
end

local function absent_id()
  local chars = {}
  for i = 1, 12 do
    local k = math.random(1, #alphabet)
    chars[i] = alphabet:sub(k, k)
  end
  return table.concat(chars)
end

function request()
  if mode == "absent" then return wrk.format("GET", "/raw/" .. absent_id()) end
  if mode == "delete" then
    if next_line > #ids then
      wrk.thread:stop()
      return wrk.format("GET", "/healthz")
    end
    local i = next_line
    next_line = next_line + 1
    return wrk.format("DELETE", "/api/v1/pastes/" .. ids[i],
                      { ["Authorization"] = "Bearer " .. tokens[i] })
  end
  return wrk.format("GET", "/raw/" .. ids[math.random(1, #ids)])
end

function response(status, headers, body) statuses.count(status) end

function done(summary, latency, requests)
  statuses.report(threads, mode == "absent" and 404 or (mode == "delete" and 204 or 200))
end
