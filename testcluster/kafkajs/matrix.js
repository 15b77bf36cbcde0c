// kafkajs (2.2.4) writes N keyed records with one header each to TOPIC,
// for testcluster's TestKafkaClientMatrix: record i has value value-i, key
// key-(i mod 997) and header i=i, sent 500 at a time, acks=-1, gzip'd.
//
// usage: node matrix.js BROKER[,BROKER...] TOPIC N
'use strict'
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

async function main () {
  const [brokers, topic, count] = process.argv.slice(2)
  const n = parseInt(count, 10)
  const kafka = new Kafka({ clientId: 'gostream-kafkajs-matrix', brokers: brokers.split(','), logLevel: logLevel.WARN, retry: { retries: 8 } })
  const producer = kafka.producer()
  await producer.connect()
  const batch = 500
  for (let i = 0; i < n; i += batch) {
    const messages = []
    for (let j = i; j < Math.min(n, i + batch); j++) {
      messages.push({ key: `key-${j % 997}`, value: `value-${j}`, headers: { i: String(j) } })
    }
    const res = await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages })
    for (const r of res) {
      if (r.errorCode !== 0) throw new Error(`produce: partition ${r.partition}: error ${r.errorCode}`)
    }
  }
  await producer.disconnect()
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : err)
  process.exit(1)
})
