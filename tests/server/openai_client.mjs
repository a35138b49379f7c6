// ork serve through the official OpenAI client (npm `openai`):
// node openai_client.mjs BASE_URL API_KEY GREEDY_CONTINUATION
import OpenAI from "openai";
import assert from "node:assert/strict";

const [baseURL, apiKey, greedy] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });

const models = await client.models.list();
assert.equal(models.data[0].id, "stories260K");

const chat = await client.chat.completions.create({
  model: "gpt-4o-mini", messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 16, temperature: 0,
});
assert.equal(chat.object, "chat.completion");
assert.ok(chat.choices[0].message.content.length > 0);
assert.equal(chat.usage.completion_tokens <= 16, true);

let streamed = "";
let chunks = 0;
const stream = await client.chat.completions.create({
  model: "gpt-4o-mini", messages: [{ role: "user", content: "Tell me a story" }], max_tokens: 16, temperature: 0, stream: true,
});
for await (const chunk of stream) {
  chunks++;
  streamed += chunk.choices[0]?.delta?.content ?? "";
}
assert.equal(streamed, chat.choices[0].message.content);
assert.ok(chunks > 2);

const completion = await client.completions.create({ model: "x", prompt: "Once upon a time", max_tokens: 24, temperature: 0 });
assert.equal(completion.choices[0].text, greedy);

// Aborting a stream half-way is clean for the client (and frees the slot).
const ac = new AbortController();
const long = await client.completions.create(
  { model: "x", prompt: "Once upon a time", max_tokens: 400, ignore_eos: true, stream: true }, { signal: ac.signal });
let n = 0;
try {
  for await (const _ of long) { if (++n === 3) ac.abort(); }
} catch (e) {
  assert.ok(e.name === "APIUserAbortError" || e.name === "AbortError", e.name);
}

await assert.rejects(
  client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "Hi" }], temperature: -3 }),
  (e) => e.status === 400 && /temperature/.test(e.message));
const wrongKey = new OpenAI({ baseURL, apiKey: "nope", maxRetries: 0 });
await assert.rejects(wrongKey.models.list(), (e) => e.status === 401);
console.log("openai client: models, chat (whole and streamed), completions, abort, errors: ok");
