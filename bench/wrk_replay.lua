-- wrk script: replays pre-generated signed deliveries (bench/gen_requests.pl)
-- to POST /hooks/<source>, each thread cycling through its own file, and
-- prints one machine-readable RESULT line at the end.
--
--   wrk -t T -c C -d D -s wrk_replay.lua URL -- OUT_PREFIX SOURCE
--
-- Requests are formatted once in init(), so wrk spends its time sending,
-- not building strings.  A thread that runs out of deliveries starts again
-- (those repeats are answered "duplicate"; the bench script counts new rows
-- in the database and reports any wrap-around).

local counter = 0
local threads = {}

function setup(thread)
	thread:set("tid", counter)
	counter = counter + 1
	table.insert(threads, thread)
end

function init(args)
	local prefix = args[1]
	local source = args[2] or "bench"
	reqs = {}
	for line in io.lines(prefix .. "." .. tid) do
		local sig, body = line:match("^([^\t]*)\t(.*)$")
		reqs[#reqs + 1] = wrk.format("POST", "/hooks/" .. source,
			{["Content-Type"] = "application/json", ["Stripe-Signature"] = sig}, body)
	end
	idx = 0
	wraps = 0
end

function request()
	idx = idx + 1
	if idx > #reqs then
		idx = 1
		wraps = wraps + 1
	end
	return reqs[idx]
end

function done(summary, latency, requests)
	local wrapped = 0
	for _, t in ipairs(threads) do
		wrapped = wrapped + (t:get("wraps") or 0)
	end
	local e = summary.errors
	io.write(string.format(
		"RESULT requests=%d duration_us=%d status_errors=%d connect_errors=%d read_errors=%d " ..
		"write_errors=%d timeouts=%d p50_us=%d p99_us=%d max_us=%d wraps=%d\n",
		summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
		latency:percentile(50), latency:percentile(99), latency.max, wrapped))
end
