// Starts the reference server, @durable-streams/server, for the side-by-side
// benchmarks and to compare conformance runs: node reference-server.mjs PORT DIR
import { DurableStreamTestServer } from "@durable-streams/server"

const port = Number(process.argv[2] ?? 4437)
const dataDir = process.argv[3]
const server = new DurableStreamTestServer({ port, host: "127.0.0.1", dataDir, longPollTimeout: 1000 })
const url = await server.start()
console.log(url)
const stop = async () => { await server.stop(); process.exit(0) }
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
