// The official client, @durable-streams/client, against one node of a
// gostream cluster (DS_BASE_URL; make conformance gives it a follower, which
// forwards every request to the stream's leader): create, append, catch-up
// read, long-poll and SSE live tails, an idempotent producer, close.
import { describe, expect, test } from "vitest"
import { DurableStream, IdempotentProducer } from "@durable-streams/client"

const baseUrl = process.env.DS_BASE_URL
if (!baseUrl) {
  throw new Error("set DS_BASE_URL to a node's HTTP address, such as http://127.0.0.1:8081")
}

const streamUrl = (name) => `${baseUrl}/v1/stream/client-test/${name}-${Date.now()}-${Math.random().toString(36).slice(2)}`

// Collects what a live session delivers until want() accepts it or the
// deadline passes.
async function collect(session, subscribe, want, timeoutMs = 15000) {
  const got = []
  let unsubscribe
  const done = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`live tail: only ${JSON.stringify(got)} after ${timeoutMs} ms`)), timeoutMs)
    unsubscribe = subscribe((items) => {
      got.push(...items)
      if (want(got)) {
        clearTimeout(timer)
        resolve()
      }
    })
  })
  try {
    await done
  } finally {
    unsubscribe?.()
    session.cancel()
  }
  return got
}

describe("@durable-streams/client against gostream", () => {
  test("create, append, catch-up read", async () => {
    const url = streamUrl("json")
    const handle = await DurableStream.create({ url, contentType: "application/json" })
    await handle.append(JSON.stringify({ n: 1 }))
    await handle.append(JSON.stringify({ n: 2 }))
    // The client sends each append as a JSON array of its messages, which
    // the server flattens one level: an array appended is one message.
    await handle.append(JSON.stringify([{ n: 3 }, { n: 4 }]))

    const res = await handle.stream({ offset: "-1", live: false })
    expect(await res.json()).toEqual([{ n: 1 }, { n: 2 }, [{ n: 3 }, { n: 4 }]])
    expect(res.upToDate).toBe(true)

    const head = await handle.head()
    expect(head.exists).toBe(true)
    expect(head.contentType).toBe("application/json")
    expect(head.offset).toBe(res.offset)

    // A second create of the same stream is refused by this client
    // (create-only); connect finds it.
    await expect(DurableStream.create({ url, contentType: "text/plain" })).rejects.toThrow()
    const again = await DurableStream.connect({ url })
    expect(again.contentType).toBe("application/json")
  })

  for (const live of ["long-poll", "sse"]) {
    test(`${live} live tail from the end`, async () => {
      const url = streamUrl(live)
      const handle = await DurableStream.create({ url, contentType: "application/json" })
      await handle.append(JSON.stringify({ before: true }))
      const tail = (await handle.head()).offset

      const session = await handle.stream({ offset: tail, live })
      const received = collect(session, (f) => session.subscribeJson((batch) => f(batch.items)), (got) => got.length >= 3)
      for (let i = 0; i < 3; i++) {
        await handle.append(JSON.stringify({ live: i }))
      }
      expect(await received).toEqual([{ live: 0 }, { live: 1 }, { live: 2 }])
    })
  }

  test("SSE live tail of a binary stream (base64 on the wire)", async () => {
    const url = streamUrl("bytes")
    const handle = await DurableStream.create({ url, contentType: "application/octet-stream" })
    const bytes = new Uint8Array([0, 1, 2, 10, 13, 255, 254, 0])
    const session = await handle.stream({ offset: "-1", live: "sse" })
    const received = collect(session, (f) => session.subscribeBytes((chunk) => f([...chunk.data])), (got) => got.length >= 2 * bytes.length)
    await handle.append(bytes)
    await handle.append(bytes)
    expect(await received).toEqual([...bytes, ...bytes])
  })

  test("an idempotent producer's appends, once each, then close", async () => {
    const url = streamUrl("producer")
    const handle = await DurableStream.create({ url, contentType: "text/plain" })
    const producer = new IdempotentProducer(handle, "client-test-writer", { epoch: 0, lingerMs: 5 })
    for (let i = 0; i < 50; i++) {
      producer.append(`m${i};`)
    }
    await producer.flush()
    await producer.close()

    const res = await handle.stream({ offset: "-1", live: false })
    let want = ""
    for (let i = 0; i < 50; i++) want += `m${i};`
    expect(await res.text()).toBe(want)
    expect(res.streamClosed).toBe(true)
    await expect(handle.append("late")).rejects.toThrow()
  })
})
