// Drives a kvforge server with the official `openai` npm client (v6): completions and chat,
// streaming and not, /v1/models, an error, and the tool-calling flow (a required call, the
// tool's result sent back, the answer; the client's own stream helper reassembling streamed
// calls). Prints one JSON object with what it got.
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
  await toolFlow(client, model, out);
  process.stdout.write(JSON.stringify(out) + '\n');
}

async function toolFlow(client, model, out) {
  const tools = [{
    type: 'function',
    function: {
      name: 'add',
      description: 'Adds two integers',
      parameters: {
        type: 'object',
        properties: { a: { type: 'integer', minimum: 0, maximum: 9 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
        required: ['a', 'b'],
        additionalProperties: false,
      },
    },
  }];
  const messages = [{ role: 'user', content: 'What is 2 plus 3?' }];
  const first = await client.chat.completions.create({
    model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, temperature: 0, max_tokens: 160,
  });
  const msg = first.choices[0].message;
  out.tool_finish = first.choices[0].finish_reason;
  out.tool_calls = (msg.tool_calls || []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments }));
  const call = msg.tool_calls[0];
  const args = JSON.parse(call.function.arguments);
  messages.push(msg);
  messages.push({ role: 'tool', tool_call_id: call.id, content: String(args.a + args.b) });
  const second = await client.chat.completions.create({ model, messages, tools, temperature: 0, max_tokens: 12 });
  out.tool_answer_finish = second.choices[0].finish_reason;
  out.tool_answer_is_text = typeof second.choices[0].message.content === 'string';

  const stream = client.chat.completions.stream({
    model, messages: messages.slice(0, 1), tools, tool_choice: 'required', parallel_tool_calls: false,
    temperature: 0, max_tokens: 160,
  });
  const final = await stream.finalChatCompletion();
  const sm = final.choices[0].message;
  out.tool_stream_finish = final.choices[0].finish_reason;
  out.tool_stream_calls = (sm.tool_calls || []).map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
