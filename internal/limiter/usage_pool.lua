-- usage_pool.lua: a usage report's charge to the Region's pools of its
-- global buckets (usage.go), around usage.lua, in the same call: this
-- file runs before bucket.lua, usage_pool_after.lua after usage.lua. A
-- report the idempotency key finds a duplicate charges no pool either;
-- nor does a copy of this call the client sent again after a lost answer
-- (its fence, a key set for a minute).
--
-- A charge spends from the pool, into debt (below 0) if it must: the
-- next block pays the debt first, and a drain leaves a pool in debt as it
-- is. A refund puts tokens back, never more than this Region's usage
-- charged in the window and has not refunded yet (the charged counter):
-- a refund can return only tokens a charge spent here.
--
-- KEYS[1..n(+1)]   as usage.lua
-- KEYS[k+2j-1]     pool j's level, one per global bucket, in bucket order
-- KEYS[k+2j]       pool j's charged counter
-- KEYS[k+2m+1]     the call's fence: unique to the call
-- ARGV[1..4n+1]    as usage.lua
-- ARGV[4n+1+j]     pool j's expiry, Unix ms
-- ARGV[4n+m+2]     m
--
-- Reply: usage.lua's.
local pm = tonumber(ARGV[#ARGV])
ARGV[#ARGV] = nil
local ufence = KEYS[#KEYS]
KEYS[#KEYS] = nil
local upools, ucharged, uexp = {}, {}, {}
for j = pm, 1, -1 do
	ucharged[j] = KEYS[#KEYS]
	KEYS[#KEYS] = nil
	upools[j] = KEYS[#KEYS]
	KEYS[#KEYS] = nil
	uexp[j] = ARGV[#ARGV]
	ARGV[#ARGV] = nil
end
