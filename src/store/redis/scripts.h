// The Lua scripts sluice runs in Redis (src/store/redis/redis_shared_state.cc); the client
// benchmark (bench/run_redis_client_bench.sh) sends the bucket script too.
#pragma once

namespace sluice::store {

// ARGV[1] is "take", "refund" or "peek", then rate, burst and cost per key. A take answers {0} when
// every bucket gave its tokens, or {i, tokens, seconds_to_wait, exceeds_burst} for the first bucket
// i (1-based) that could not, having written nothing. A peek answers {-1, tokens...}, one per key
// in order, and writes nothing (GET /api/v1/limits). A key expires when its bucket would be full
// again, so idle clients cost no memory; a missing key is a full bucket, and a refund to it is a
// no-op.
inline constexpr const char* kBucketScript = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local take = ARGV[1] == 'take'
local peek = ARGV[1] == 'peek'
local left = {}
for i = 1, #KEYS do
  local rate = tonumber(ARGV[3 * i - 1])
  local burst = tonumber(ARGV[3 * i])
  local cost = tonumber(ARGV[3 * i + 1])
  local state = redis.call('HMGET', KEYS[i], 'tokens', 'at')
  local tokens = tonumber(state[1])
  local at = tonumber(state[2])
  local seen = tokens ~= nil and at ~= nil
  if not seen then tokens = burst; at = now end
  if now > at then tokens = math.min(burst, tokens + (now - at) * rate) end
  if peek then
    left[i] = string.format('%.17g', math.max(0, tokens))
  elseif take then
    if cost > burst then return {i, string.format('%.17g', tokens), '0', 1} end
    if tokens + 1e-9 < cost then
      return {i, string.format('%.17g', tokens), string.format('%.17g', (cost - tokens) / rate), 0}
    end
    left[i] = tokens - cost
  elseif seen then
    left[i] = math.min(burst, tokens + cost)
  else
    left[i] = false
  end
end
if peek then
  table.insert(left, 1, -1)
  return left
end
for i = 1, #KEYS do
  if left[i] then
    local rate = tonumber(ARGV[3 * i - 1])
    local burst = tonumber(ARGV[3 * i])
    redis.call('HSET', KEYS[i], 'tokens', string.format('%.17g', left[i]), 'at',
               string.format('%.6f', now))
    redis.call('PEXPIRE', KEYS[i], math.ceil((burst - left[i]) / rate * 1000) + 1000)
  end
end
return {0}
)lua";

// Replace the entry with the tombstone and announce it, in one step so no reader can see the
// announcement before the tombstone.
inline constexpr const char* kInvalidateScript = R"lua(
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return redis.call('PUBLISH', ARGV[3], ARGV[4])
)lua";

}  // namespace sluice::store
