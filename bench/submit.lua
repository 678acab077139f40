-- submit.lua: wrk script for bench/submit.sh.  Every request POSTs one valid job
-- spec to /api/v1/jobs; responses other than 201 Created are counted (wrk itself
-- only reports non-2xx), and the first few bad bodies are printed, so a fast
-- stream of errors can never pass for throughput.
--   wrk -t2 -c32 -d10s -s bench/submit.lua http://127.0.0.1:PORT/api/v1/jobs

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
if os.getenv("FB_SUBMIT_TOKEN") then -- bench/submit.sh with SUBMIT_AUTH=1
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("FB_SUBMIT_TOKEN")
end
wrk.body = os.getenv("FB_SUBMIT_BODY") or
  '{"workload":"gemm_bias_relu","engine":"native","device":"cpu",' ..
  '"variants":["eager","fused"],"iterations":5,"warmup":1,' ..
  '"params":{"m":64,"k":64,"n":64},"labels":{"bench":"submit"}}'

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  created = 0
  other = 0
  shown = 0
end

function response(status, headers, body)
  if status == 201 then
    created = created + 1
  else
    other = other + 1
    if shown < 3 then
      shown = shown + 1
      io.stderr:write("submit.lua: status " .. status .. ": " .. (body or "") .. "\n")
    end
  end
end

function done(summary, latency, requests)
  local c, o = 0, 0
  for _, t in ipairs(threads) do
    c = c + t:get("created")
    o = o + t:get("other")
  end
  io.write(string.format("created_201 %d\nnot_201 %d\n", c, o))
  io.write(string.format("latency_p50_ms %.3f\nlatency_p99_ms %.3f\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
