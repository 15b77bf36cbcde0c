// A kafkajs 2.2.4 consumer group of two members reads a topic: each
// prints "member partition offset value" for every message, as JSON
// lines, until it has seen the number of messages asked for in all, or
// its deadline. Usage: node group.js BROKERS TOPIC GROUP COUNT
const { Kafka, logLevel } = require('kafkajs')

const [brokers, topic, groupId, count] = process.argv.slice(2)
const want = parseInt(count, 10)
const kafka = new Kafka({ clientId: 'kafkajs-group', brokers: brokers.split(','), logLevel: logLevel.NOTHING })

async function main () {
  const seen = new Set()
  let done
  const finished = new Promise(resolve => { done = resolve })
  const members = []
  for (const name of ['a', 'b']) {
    const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 })
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        process.stdout.write(JSON.stringify({ member: name, partition, offset: message.offset, value: message.value.toString() }) + '\n')
        seen.add(message.value.toString())
        if (seen.size >= want) done()
      }
    })
    members.push(consumer)
  }
  const deadline = setTimeout(() => done(), 90000)
  await finished
  clearTimeout(deadline)
  for (const m of members) await m.disconnect()
}

main().catch(err => { console.error(err); process.exit(1) })
