-- Shared by the wrk scripts that count their answers' statuses (create, read_ids, growth_*):
--   local statuses = require("statuses")   -- with package.path extended to this folder
--   statuses.count(status) in response(); statuses.report(threads, 200) in done().
-- Each wrk thread has its own Lua state, so the counts live in a global that done() reads per thread.
local M = {}

counts = {}

function M.count(status) counts[status] = (counts[status] or 0) + 1 end

-- Prints "status <code> <count>" per code and "non_<ok> <count>", the lines bench/growth.py parses.
function M.report(threads, ok)
  local total, bad = {}, 0
  for _, thread in ipairs(threads) do
    for code, n in pairs(thread:get("counts") or {}) do total[code] = (total[code] or 0) + n end
  end
  local codes = {}
  for code in pairs(total) do table.insert(codes, code) end
  table.sort(codes)
  for _, code in ipairs(codes) do
    io.write(string.format("status %d %d\n", code, total[code]))
    if code ~= ok then bad = bad + total[code] end
  end
  io.write(string.format("non_%d %d\n", ok, bad))
end

-- Numbers each thread from 1 in setup(), so a thread can name its own files.
function M.numbered(threads)
  return function(thread)
    table.insert(threads, thread)
    thread:set("tid", #threads)
  end
end

return M
