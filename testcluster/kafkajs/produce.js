// kafkajs (2.2.4, non-flexible versions only) against a gostream cluster,
// run by testcluster's TestKafkajsProduces: the admin client creates the
// topic, the producer writes N keyed records with a header and their own
// timestamps (half the batches gzip'd) with acks=-1 and then acks=1, and
// the admin client lists the partitions' offsets. It prints one JSON line:
// the offsets, for the Go test to compare with what gostream-ctl reads.
//
// usage: node produce.js BROKER[,BROKER...] TOPIC N
'use strict'
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

async function main () {
  const [brokers, topic, count] = process.argv.slice(2)
  const n = parseInt(count, 10)
  const kafka = new Kafka({
    clientId: 'gostream-kafkajs-check',
    brokers: brokers.split(','),
    logLevel: logLevel.WARN,
    retry: { retries: 8 }
  })
  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic, numPartitions: 3, replicationFactor: 3 }]
  })
  if (!created) throw new Error('createTopics: the topic already exists')
  const producer = kafka.producer()
  await producer.connect()
  const base = 1700000000000
  const batch = 100
  for (let i = 0; i < n; i += batch) {
    const messages = []
    for (let j = i; j < Math.min(n, i + batch); j++) {
      messages.push({ key: `key-${j % 11}`, value: `value-${j}`, headers: { i: String(j) }, timestamp: String(base + j) })
    }
    const res = await producer.send({
      topic,
      acks: (i / batch) % 4 === 3 ? 1 : -1,
      compression: (i / batch) % 2 === 1 ? CompressionTypes.GZIP : CompressionTypes.None,
      messages
    })
    for (const r of res) {
      if (r.errorCode !== 0) throw new Error(`produce: partition ${r.partition}: error ${r.errorCode}`)
    }
  }
  const offsets = await admin.fetchTopicOffsets(topic)
  await producer.disconnect()
  await admin.disconnect()
  console.log(JSON.stringify({ offsets }))
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
