-- wrk script: every request a fresh POST built from a line of a bodies file.
--   wrk ... -s bench/wrk_signed.lua URL -- MODE BODIES_FILE SECRET_FILE THREADS PREFIX [HEADERS_FILE]
-- HEADERS_FILE: optional extra request headers, one "Name: value" per line.
-- MODE "hmac": Volcengine signing (seed 003): X-Content-Timestamp (unix s), X-Content-Nonce
--   (PREFIX .. thread id .. counter, letters and digits, at most 32), X-Content-Signature =
--   lower-case hex HMAC-SHA256(secret, timestamp .. nonce .. body), computed with the
--   OpenSSL libcrypto wrk itself links (LuaJIT FFI).
-- MODE "bearer": Authorization: Bearer <contents of SECRET_FILE>.
-- Thread k of THREADS sends lines k, k+THREADS, k+2*THREADS, ...: no line is sent twice
-- in a run unless the file runs out ("wrapped" counts the sends past its end).
-- done() prints one JSON line (latencies in microseconds) for bench.wrk to parse.

local ffi = require("ffi")
ffi.cdef [[
typedef struct evp_md_st EVP_MD;
const EVP_MD *EVP_sha256(void);
unsigned char *HMAC(const EVP_MD *evp_md, const void *key, int key_len,
                    const unsigned char *d, size_t n, unsigned char *md, unsigned int *md_len);
]]
local ok_c, crypto = pcall(function() ffi.C.EVP_sha256() return ffi.C end)
if not ok_c then crypto = ffi.load("crypto") end

local threads = {}
local next_id = 1

function setup(thread)
   thread:set("id", next_id)
   next_id = next_id + 1
   table.insert(threads, thread)
end

local mode, bodies, nbodies, secret, nthreads, prefix
local extra = {}
sent, wrapped = 0, 0 -- globals: done() reads them with thread:get
local md = ffi.new("unsigned char[32]")
local mdlen = ffi.new("unsigned int[1]")
local hex = {}
for i = 0, 255 do hex[i] = string.format("%02x", i) end
local sha256

local function hmac_hex(data)
   crypto.HMAC(sha256, secret, #secret, data, #data, md, mdlen)
   local out = {}
   for i = 0, 31 do out[i + 1] = hex[md[i]] end
   return table.concat(out)
end

function init(args)
   mode, nthreads, prefix = args[1], tonumber(args[4]), args[5]
   bodies = {}
   for line in io.lines(args[2]) do bodies[#bodies + 1] = line end
   nbodies = #bodies
   local f = assert(io.open(args[3], "rb"))
   secret = f:read("*a"):gsub("%s+$", "")
   f:close()
   sha256 = crypto.EVP_sha256()
   if args[6] and args[6] ~= "" then
      for line in io.lines(args[6]) do
         local name, value = line:match("^([^:]+):%s*(.-)%s*$")
         if name then extra[name] = value end
      end
   end
end

function request()
   local k = sent * nthreads + (id - 1)
   sent = sent + 1
   if k >= nbodies then wrapped = wrapped + 1 end
   local body = bodies[(k % nbodies) + 1]
   local headers = { ["Content-Type"] = "application/json" }
   for name, value in pairs(extra) do headers[name] = value end
   if mode == "hmac" then
      local ts = tostring(os.time())
      local nonce = prefix .. id .. string.format("%x", sent)
      headers["X-Content-Timestamp"] = ts
      headers["X-Content-Nonce"] = nonce
      headers["X-Content-Signature"] = hmac_hex(ts .. nonce .. body)
   else
      headers["Authorization"] = "Bearer " .. secret
   end
   return wrk.format("POST", nil, headers, body)
end

function done(summary, latency, requests)
   local total_wrapped, total_sent = 0, 0
   for _, t in ipairs(threads) do
      total_wrapped = total_wrapped + (t:get("wrapped") or 0)
      total_sent = total_sent + (t:get("sent") or 0)
   end
   local e = summary.errors
   io.write(string.format(
      '{"requests":%d,"duration_us":%d,"bytes":%d,"connect_errors":%d,"read_errors":%d,'
      .. '"write_errors":%d,"status_errors":%d,"timeouts":%d,"p50_us":%d,"p99_us":%d,'
      .. '"p999_us":%d,"max_us":%d,"mean_us":%.1f,"sent":%d,"wrapped":%d}\n',
      summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
      e.timeout, latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
      latency.max, latency.mean, total_sent, total_wrapped))
end
