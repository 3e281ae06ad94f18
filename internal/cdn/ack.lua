-- ack.lua: the store took a batch; record it in the index and drop what
-- the outbox still holds of it unchanged (a newer write stays queued).
--
-- KEYS[1] outbox hash, KEYS[2] live hash, KEYS[3] expiry sorted set
-- ARGV: triples of
--   key          the store key
--   sent         the outbox value sent: "" for a delete, else
--                "<fingerprint> <expiry> <value>"; "-" when the key came
--                from the sweeper or the reconciler, not the outbox
--   live         "<rule id> <fingerprint>" for a put, "" for a delete
--   expiry       Unix seconds of a put (ignored for a delete)
-- (four values per key)
-- Reply: the number of outbox fields dropped.
local dropped = 0
for i = 1, #ARGV, 4 do
  local key, sent, live, expiry = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if sent ~= "-" and redis.call("HGET", KEYS[1], key) == sent then
    redis.call("HDEL", KEYS[1], key)
    dropped = dropped + 1
  end
  if live == "" then
    redis.call("HDEL", KEYS[2], key)
    redis.call("ZREM", KEYS[3], key)
  else
    redis.call("HSET", KEYS[2], key, live)
    redis.call("ZADD", KEYS[3], tonumber(expiry), key)
  end
end
return dropped
