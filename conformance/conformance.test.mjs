// The Durable Streams server conformance suite, run against DS_BASE_URL.
// make conformance starts a gostream cluster and runs this file once with
// the base URL on the stream leaders' node and once on a follower's.
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

const baseUrl = process.env.DS_BASE_URL
if (!baseUrl) {
  throw new Error("set DS_BASE_URL to a node's HTTP address, such as http://127.0.0.1:8081")
}

runConformanceTests({
  baseUrl,
  longPollTimeoutMs: Number(process.env.DS_LONG_POLL_TIMEOUT_MS ?? 20000),
})
