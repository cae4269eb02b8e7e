/**
 * The example's browser page, one self-contained document (no script or style from
 * elsewhere). It asks the stand-in customer backend (POST /token) for a token, opens the
 * WebSocket with it, and shows every close code and reason. `window.chat` is its state, which
 * the example's browser test reads: the frames received and the closes, each with the time
 * it happened (performance.timeOrigin + performance.now(), comparable with the test's clock).
 */
export const CHAT_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>chat-auth example chat</title>
<style>
  body { font: 15px/1.4 system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; padding: 0 1rem; }
  #log { border: 1px solid #ccc; height: 18rem; overflow-y: auto; padding: .5rem; margin: .5rem 0; }
  #log p { margin: .2rem 0; }
  .system { color: #a33; }
  form { display: flex; gap: .5rem; }
  input[name=text] { flex: 1; }
</style>
</head>
<body>
<h1>Example chat</h1>
<form id="join">
  <input name="userId" placeholder="your name (the customer backend's user id)" required maxlength="255">
  <button>Join</button>
  <button type="button" id="reconnect" disabled>Reconnect with the same token</button>
</form>
<div id="log" aria-live="polite"></div>
<form id="send"><input name="text" autocomplete="off" disabled><button disabled>Send</button></form>
<script>
'use strict'
const chat = { token: null, user: null, socket: null, ready: false, frames: [], closes: [] }
window.chat = chat
const now = () => performance.timeOrigin + performance.now()
const log = document.getElementById('log')
const sendForm = document.getElementById('send')

function show(text, system) {
  const line = document.createElement('p')
  line.textContent = text
  if (system) line.className = 'system'
  log.append(line)
  log.scrollTop = log.scrollHeight
}

function setReady(ready) {
  chat.ready = ready
  for (const field of sendForm.elements) field.disabled = !ready
}

// The token travels as a WebSocket subprotocol ("bearer.<jwt>", next to "chat"): a browser
// cannot set an Authorization header on a WebSocket, and a query string ends up in logs.
function connect() {
  const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/chat'
  const socket = new WebSocket(url, ['chat', 'bearer.' + chat.token])
  chat.socket = socket
  socket.onmessage = (event) => {
    const frame = JSON.parse(event.data)
    chat.frames.push({ ...frame, receivedAt: now() })
    if (frame.type === 'ready') {
      setReady(true)
      show('connected as ' + frame.user.externalId, true)
    } else if (frame.type === 'message') {
      show(frame.from + ': ' + frame.text)
    }
  }
  socket.onclose = (event) => {
    chat.closes.push({ code: event.code, reason: event.reason, at: now() })
    if (chat.socket === socket) setReady(false)
    show('closed ' + event.code + (event.reason ? ': ' + event.reason : ''), true)
  }
  return socket
}

document.getElementById('join').addEventListener('submit', async (event) => {
  event.preventDefault()
  const userId = new FormData(event.target).get('userId')
  const answer = await fetch('/token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId }) })
  const body = await answer.json()
  if (!answer.ok) return show('no token: ' + body.message, true)
  chat.token = body.token
  chat.user = body.user
  document.getElementById('reconnect').disabled = false
  connect()
})

document.getElementById('reconnect').addEventListener('click', () => {
  if (chat.socket) chat.socket.close()
  connect()
})

sendForm.addEventListener('submit', (event) => {
  event.preventDefault()
  const field = sendForm.elements.text
  if (!chat.ready || field.value === '') return
  chat.socket.send(JSON.stringify({ text: field.value }))
  field.value = ''
})
</script>
</body>
</html>
`
