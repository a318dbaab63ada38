package redisguard

import "github.com/redis/go-redis/v9"

// guardScript is the one script every fenced write runs. redis.Script.Run
// calls it by EVALSHA and falls back to EVAL (which caches it again) when the
// server answers NOSCRIPT.
//
// It validates every argument and reads everything before its first write,
// because Redis does not roll back a script that fails halfway: a refused or
// invalid call changes nothing. Refusals are ordinary array replies whose
// first element names them; the Go side maps them to typed errors.
var guardScript = redis.NewScript(guardLua)

const guardLua = `
-- Fence guard: compare a fencing token with the one stored beside the value
-- and write both in one atomic step.
-- KEYS[1]  resource hash {P:R}: fields value, token, version
-- KEYS[2]  op record {P:R}:op:<hex op_id> (only when the write has an op_id)
-- ARGV[1]  mode: set | add | check
-- ARGV[2]  token, an integer in [1, 2^53-1]
-- ARGV[3]  payload: the value (set), the delta (add), empty (check)
-- ARGV[4]  op record TTL in ms (>= 1)
-- ARGV[5]  resource key TTL in ms (0: none)
-- Replies: {"OK", token, version, value, replayed}  (value only for add)
--          {"STALE", last_token} {"CONFLICT"} {"INVALID", field, bound}
--          {"NOT_INTEGER", message} {"CORRUPT", what}
local function int(s, lo, hi)
  if type(s) ~= "string" or #s > 16 or not string.match(s, "^%d+$") then return nil end
  local n = tonumber(s)
  if n < lo or n > hi then return nil end
  return n
end
local function dec(n) return string.format("%.0f", n) end
local maxtoken = 9007199254740991

if #KEYS < 1 or #KEYS > 2 then return {"INVALID", "keys", "1 or 2 keys"} end
local mode, payload = ARGV[1], ARGV[3]
if mode ~= "set" and mode ~= "add" and mode ~= "check" then
  return {"INVALID", "mode", "set, add or check"}
end
local token = int(ARGV[2], 1, maxtoken)
if not token then return {"INVALID", "token", "an integer in [1, 9007199254740991]"} end
if type(payload) ~= "string" then return {"INVALID", "payload", "present"} end
if mode == "add" and (#payload > 20 or not string.match(payload, "^-?%d+$")) then
  return {"INVALID", "delta", "a 64-bit integer"}
end
if mode == "check" and (#payload > 0 or #KEYS > 1) then
  return {"INVALID", "payload", "empty for check, without op_id"}
end
local opttl = int(ARGV[4], 1, 1e15)
if not opttl then return {"INVALID", "op_ttl", "an integer number of ms >= 1"} end
local keyttl = int(ARGV[5], 0, 1e15)
if not keyttl then return {"INVALID", "key_ttl", "an integer number of ms >= 0"} end

-- Replay before the token check: a repeated op_id returns its saved result.
local fp
if #KEYS == 2 then
  fp = redis.sha1hex(mode .. "\n" .. dec(token) .. "\n" .. payload)
  local rec = redis.call("GET", KEYS[2])
  if rec then
    local f, t, v, val = string.match(rec, "^(%x+)\n(%d+)\n(%d+)\n(.*)$")
    if not f then return {"CORRUPT", "op record"} end
    if f ~= fp then return {"CONFLICT"} end
    return {"OK", tonumber(t), tonumber(v), val, 1}
  end
end

local cur = redis.call("HMGET", KEYS[1], "token", "version")
local last, version = 0, 0
if cur[1] then
  last = int(cur[1], 1, maxtoken)
  if not last then return {"CORRUPT", "token"} end
end
if cur[2] then
  version = int(cur[2], 0, 1e15)
  if not version then return {"CORRUPT", "version"} end
end
if token < last then return {"STALE", last} end

local value = ""
if mode == "check" then
  if token > last then redis.call("HSET", KEYS[1], "token", dec(token)) end
else
  version = version + 1
  if mode == "set" then
    redis.call("HSET", KEYS[1], "value", payload, "token", dec(token), "version", dec(version))
  else
    -- the first write: if it fails, nothing has changed yet
    local r = redis.pcall("HINCRBY", KEYS[1], "value", payload)
    if type(r) == "table" and r.err then return {"NOT_INTEGER", r.err} end
    value = redis.call("HGET", KEYS[1], "value")
    redis.call("HSET", KEYS[1], "token", dec(token), "version", dec(version))
  end
end
if keyttl > 0 and (mode ~= "check" or token > last) then
  redis.call("PEXPIRE", KEYS[1], keyttl)
end
if fp then
  redis.call("SET", KEYS[2], fp .. "\n" .. dec(token) .. "\n" .. dec(version) .. "\n" .. value, "PX", opttl)
end
return {"OK", token, version, value, 0}
`
