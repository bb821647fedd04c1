-- Shared by the wrk scripts of load.sh: one machine-readable line at the end.
-- RESULT <requests> <requests/s> <p50 us> <p99 us> <max us> <errors> <non-2xx>
local M = {}

function M.done(summary, latency, requests)
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format("RESULT %d %.1f %.1f %.1f %.1f %d %d\n",
    summary.requests, summary.requests / secs,
    latency:percentile(50), latency:percentile(99), latency.max,
    e.connect + e.read + e.write + e.timeout, e.status))
end

return M
