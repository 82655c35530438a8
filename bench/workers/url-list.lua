-- wrk asks each of a list of paths once, then stops (bench/lib/wrk.ts wrkUrlList):
--   wrk -t1 -c<in flight> -s url-list.lua <origin> -- <paths file> <mime> <Imgapi-Cache or -> <heads file>
-- A connection with no path left to ask waits (delay) until the last answer stops the thread.
-- "url-list started" and "url-list stopped" are written as the first request goes and as the last
-- answer comes. An answer that is not a 200 of <mime> (with that Imgapi-Cache) is an error. done() prints the
-- results as "url-list <name> <value>" lines; each answer's first 64 KiB go to <heads file>
-- ("<length>\n<bytes>" each), for the bench's width check after the run.
local requests, mime, expect_cache = {}, nil, nil
local claimed, sent, answered = 0, 0, 0
local heads
-- Globals: done() reads them from the thread with thread:get (strings up to their first NUL
-- byte only, so the heads are written as they come, to a file opened once). cpu_seconds: what
-- wrk used from the first request to the last answer (os.clock is the process's CPU time).
lengths, errors, cpu_seconds = {}, {}, 0
local cpu_at_start

function init(args)
  mime, expect_cache = args[2], args[3]
  heads = io.open(args[4], "wb")
  for path in io.lines(args[1]) do requests[#requests + 1] = wrk.format("GET", path) end
end

-- wrk asks delay() before each request() of a connection, and another connection's delay() may
-- come between the two: a path is claimed here, where the connection learns whether it waits.
function delay()
  if not cpu_at_start then
    cpu_at_start = os.clock()
    io.write("url-list started\n")
    io.stdout:flush()
  end
  if claimed < #requests then
    claimed = claimed + 1
    return 0
  end
  return 3600000
end

-- wrk also calls request() once before the run, to check the script: that one is not sent.
function request()
  if sent == claimed then return requests[1] end
  sent = sent + 1
  return requests[sent]
end

function response(status, headers, body)
  answered = answered + 1
  local lower = {}
  for name, value in pairs(headers) do lower[string.lower(name)] = value end
  if status ~= 200 then
    errors[#errors + 1] = status .. ": " .. string.sub(body, 1, 300)
  elseif lower["content-type"] ~= mime then
    errors[#errors + 1] = "content-type " .. tostring(lower["content-type"]) .. " is not " .. mime
  elseif expect_cache ~= "-" and lower["imgapi-cache"] ~= expect_cache then
    errors[#errors + 1] = "Imgapi-Cache: " .. tostring(lower["imgapi-cache"]) .. " (expected " .. expect_cache .. ")"
  end
  lengths[answered] = #body
  local head = string.sub(body, 1, 65536)
  heads:write(#head, "\n", head)
  if answered == #requests then
    heads:close()
    cpu_seconds = os.clock() - cpu_at_start
    -- wrk's main thread sleeps out -d regardless: the bench ends it with SIGINT on this line.
    io.write("url-list stopped\n")
    io.stdout:flush()
    wrk.thread:stop()
  end
end

local threads = {}
function setup(thread) threads[#threads + 1] = thread end

function done(summary, latency)
  io.write("url-list duration_us ", summary.duration, "\n")
  io.write("url-list requests ", summary.requests, "\n")
  for p = 1, 100 do io.write("url-list latency_us ", latency:percentile(p), "\n") end
  for _, thread in ipairs(threads) do
    io.write("url-list cpu_seconds ", thread:get("cpu_seconds"), "\n")
    for _, length in ipairs(thread:get("lengths")) do io.write("url-list length ", length, "\n") end
    for _, message in ipairs(thread:get("errors")) do io.write("url-list error ", (string.gsub(message, "\n", " ")), "\n") end
  end
end
