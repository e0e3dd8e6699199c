-- levee fleet quotas: one instance's exchange for a batch of tenants.
--
-- KEYS[1]          the zset of live instances (member: id, score: ms)
-- KEYS[2i], [2i+1] tenant i's hash (field per instance: "wants,has,usage";
--                  field "_": the sums) and zset (member: id, score: ms)
-- ARGV[1]          instance id
-- ARGV[2]          ttl, ms
-- ARGV[3+5i ..]    tenant i: quota, wants, target, usage (micro-cores),
--                  release (1 or 0)
--
-- Returns {live, has_1, sumwants_1, sumhas_1, sumusage_1, n_1, ...}.
-- Time is Redis's own (TIME), so the instances' clocks do not matter.
-- The grant rule is fleet.grant: min(target, quota - the others' has).
local id = ARGV[1]
local ttl = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cutoff = now - ttl

redis.call('ZADD', KEYS[1], now, id)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. cutoff)
redis.call('PEXPIRE', KEYS[1], 2 * ttl)
local out = {redis.call('ZCARD', KEYS[1])}

local function parse(s)
  if not s then return 0, 0, 0 end
  local w, h, u = string.match(s, '^(%d+),(%d+),(%d+)$')
  if not w then return 0, 0, 0 end
  return tonumber(w), tonumber(h), tonumber(u)
end

local function fmt(a, b, c)
  return string.format('%d,%d,%d', a, b, c)
end

-- rebuild recomputes a tenant's sums from its entries and drops fields
-- and members without a partner (after an eviction or a manual edit).
local function rebuild(h, z)
  local sw, sh, su = 0, 0, 0
  local members = {}
  for _, m in ipairs(redis.call('ZRANGE', z, 0, -1)) do members[m] = true end
  local all = redis.call('HGETALL', h)
  local fields = {}
  for i = 1, #all, 2 do
    local f = all[i]
    if f ~= '_' then
      if members[f] then
        local w, hh, u = parse(all[i + 1])
        sw, sh, su = sw + w, sh + hh, su + u
        fields[f] = true
      else
        redis.call('HDEL', h, f)
      end
    end
  end
  for m in pairs(members) do
    if not fields[m] then redis.call('ZREM', z, m) end
  end
  return sw, sh, su
end

local ntenants = (#KEYS - 1) / 2
for i = 0, ntenants - 1 do
  local h, z = KEYS[2 + 2 * i], KEYS[3 + 2 * i]
  local a = 3 + 5 * i
  local quota, wants, target, usage = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local release = ARGV[a + 4] == '1'

  local sw, sh, su
  if redis.call('HLEN', h) - 1 ~= redis.call('ZCARD', z) then
    sw, sh, su = rebuild(h, z)
  else
    sw, sh, su = parse(redis.call('HGET', h, '_'))
  end
  -- Reclaim the leases of instances silent for longer than ttl.
  local dead = redis.call('ZRANGEBYSCORE', z, '-inf', '(' .. cutoff, 'LIMIT', 0, 256)
  for _, d in ipairs(dead) do
    if d ~= id then
      local w, hh, u = parse(redis.call('HGET', h, d))
      sw, sh, su = sw - w, sh - hh, su - u
      redis.call('HDEL', h, d)
      redis.call('ZREM', z, d)
    end
  end
  local ow, oh, ou = parse(redis.call('HGET', h, id))
  sw, sh, su = sw - ow, sh - oh, su - ou
  local has = 0
  if release then
    redis.call('HDEL', h, id)
    redis.call('ZREM', z, id)
  else
    has = math.max(0, math.min(target, quota - sh))
    sw, sh, su = sw + wants, sh + has, su + usage
    redis.call('HSET', h, id, fmt(wants, has, usage))
    redis.call('ZADD', z, now, id)
  end
  local n = redis.call('ZCARD', z)
  if n == 0 then
    redis.call('DEL', h, z)
  else
    redis.call('HSET', h, '_', fmt(sw, sh, su))
    redis.call('PEXPIRE', h, 2 * ttl)
    redis.call('PEXPIRE', z, 2 * ttl)
  end
  table.insert(out, has)
  table.insert(out, sw)
  table.insert(out, sh)
  table.insert(out, su)
  table.insert(out, n)
end
return out
