// api.js: the page's calls to placer serve's JSON API (docs/serve.md).
// Each returns {ok, status, data}; data is the parsed JSON, or {error} for
// a reply that is not JSON. Errors are HTTP 400 with {"error": "<one line>"}.

export async function getJSON(path) {
  return reply(await fetch(path));
}

export async function postJSON(path, body) {
  return reply(await fetch(path, {method: 'POST', body: JSON.stringify(body)}));
}

export async function postText(path, body) {
  const r = await fetch(path, {method: 'POST', body: JSON.stringify(body)});
  const text = await r.text();
  if (r.ok) return {ok: true, status: r.status, text};
  let error = text;
  try { error = JSON.parse(text).error; } catch (e) { /* keep the text */ }
  return {ok: false, status: r.status, text: '', error};
}

async function reply(r) {
  const text = await r.text();
  let data;
  try { data = JSON.parse(text); } catch (e) { data = {error: text}; }
  return {ok: r.ok, status: r.status, data};
}

// POST /api/plan: progress lines {"progress": {...}} until {"result": "plan"},
// then placer plan --json's bytes; or {"error": ...}. onProgress gets each
// progress object. signal (an AbortController's) cancels: the server stops
// the plan when the connection closes.
export async function streamPlan(body, onProgress, signal) {
  const r = await fetch('/api/plan', {method: 'POST', body: JSON.stringify(body), signal});
  if (!r.ok) return reply(r);
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '', result = false;
  for (;;) {
    const {value, done} = await reader.read();
    if (value) buf += dec.decode(value, {stream: true});
    while (!result) {
      const nl = buf.indexOf('\n');
      if (nl < 0) break;
      const line = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      if (line.progress) onProgress(line.progress);
      else if (line.result) result = true;
      else if (line.error) return {ok: false, status: line.status || 500, data: line};
    }
    if (done) break;
  }
  if (!result) return {ok: false, status: 500, data: {error: 'the plan stream ended early'}};
  return {ok: true, status: 200, data: JSON.parse(buf)};
}
