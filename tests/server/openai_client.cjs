// Drives a kvforge server with the official `openai` npm client (v6): completions and chat,
// streaming and not, /v1/models, and an error. Prints one JSON object with what it got.
//   NODE_PATH=<prefix>/node_modules node openai_client.cjs http://127.0.0.1:PORT MODEL API_KEY
'use strict';
const { OpenAI } = require('openai');

async function main() {
  const [baseURL, model, apiKey] = process.argv.slice(2);
  const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey, maxRetries: 0, timeout: 60000 });
  const out = {};
  const prompt = 'Once upon a time';

  const c = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0 });
  out.completion = c.choices[0].text;
  out.completion_finish = c.choices[0].finish_reason;
  out.completion_tokens = c.usage.completion_tokens;

  let text = '';
  const cs = await client.completions.create({ model, prompt, max_tokens: 24, temperature: 0, stream: true });
  for await (const chunk of cs) {
    for (const choice of chunk.choices) text += choice.text;
  }
  out.completion_stream = text;

  const messages = [{ role: 'user', content: prompt }];
  const ch = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0 });
  out.chat = ch.choices[0].message.content;
  out.chat_role = ch.choices[0].message.role;

  text = '';
  let usage = null;
  const chs = await client.chat.completions.create({
    model, messages, max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  for await (const chunk of chs) {
    for (const choice of chunk.choices) text += choice.delta.content || '';
    if (chunk.usage) usage = chunk.usage;
  }
  out.chat_stream = text;
  out.chat_stream_completion_tokens = usage ? usage.completion_tokens : -1;

  const models = await client.models.list();
  out.models = models.data.map((m) => m.id);

  try {
    await client.completions.create({ model, prompt, max_tokens: -1 });
    out.error_status = 0;
  } catch (e) {
    out.error_status = e.status;
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
