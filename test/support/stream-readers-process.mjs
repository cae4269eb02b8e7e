// Event streams read as fast as they come, in a process of their own, so that a flood of
// events they take never delays what the test itself observes (another stream's event
// against an HTTP answer). Plain JavaScript: it runs without a loader.
//   node stream-readers-process.mjs <url> <authorization> <count> [last-event-id] [pause-ms]
// With pause-ms, each stream waits that long after every chunk it reads: a client slower than
// the node, so that a replay lasts (its node waits for it to read).
// Every 100 ms it writes a JSON line {streams: [{stream, events, backlog, ordered, tail}]}:
// `backlog` counts the api_key.created events, `ordered` says they came as keys k1, k2, …
// each once, and `tail` is every other event as [type, detail], in order. The streams never
// end by themselves: the test stops the process.
const [url, authorization, count, lastEventId, pauseMs] = process.argv.slice(2)
const pause = Number(pauseMs ?? 0)

async function read(stream) {
  const headers = { accept: 'text/event-stream', authorization, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) }
  const response = await fetch(url, { headers })
  if (response.status !== 200) throw new Error(`stream ${stream}: ${response.status} ${await response.text()}`)
  const summary = { stream, events: 0, ordered: true, nextKey: 1, tail: [] }
  progress[stream] = summary
  const decoder = new TextDecoder()
  let text = ''
  for await (const chunk of response.body) {
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause))
    const blocks = (text + decoder.decode(chunk, { stream: true })).split('\n\n')
    text = blocks.pop()
    for (const block of blocks) {
      const data = block.split('\n').find((line) => line.startsWith('data: '))
      if (data === undefined) continue
      const event = JSON.parse(data.slice(6))
      summary.events++
      if (event.type === 'api_key.created') {
        if (event.subject.keyId !== `k${summary.nextKey}`) summary.ordered = false
        summary.nextKey++
      } else summary.tail.push([event.type, event.detail])
    }
  }
  return summary
}

const progress = []
const report = () => process.stdout.write(JSON.stringify({ streams: progress.map(({ stream, events, ordered, nextKey, tail }) => ({ stream, events, ordered, backlog: nextKey - 1, tail })) }) + '\n')
setInterval(report, 100)
Promise.all(Array.from({ length: Number(count) }, (_, i) => read(i))).catch((error) => {
  process.stdout.write(JSON.stringify({ error: error.message }) + '\n')
  process.exit(1)
})
