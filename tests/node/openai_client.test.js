// The official `openai` npm client against ecoserve.
// Uses $ECOSERVE_URL (e.g. http://127.0.0.1:8000) when set; otherwise spawns
// `$ECOSERVE_BIN serve --port 0` (default ../../build/ecoserve) with
// $ECOSERVE_MODEL (default ../shared/data/models/tinystories-656k-q8_0.gguf)
// and stops it with SIGTERM at the end; $ECOSERVE_SERVE_ARGS (space-separated) are
// added to its command line, e.g. "--instances 2 --router cache-aware" to run the
// same tests against a cluster. Run: npm ci && node --test
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const bin = process.env.ECOSERVE_BIN ?? path.join(repo, 'build', 'ecoserve');
const modelFile = process.env.ECOSERVE_MODEL ?? path.resolve(repo, '..', 'shared', 'data', 'models', 'tinystories-656k-q8_0.gguf');

let child = null;
let baseURL = process.env.ECOSERVE_URL ?? null;
let skip = null;

before(async () => {
  if (baseURL) return;
  if (!existsSync(bin) || !existsSync(modelFile)) {
    skip = `set ECOSERVE_URL, or build ${bin} and provide ${modelFile}`;
    return;
  }
  const extra = (process.env.ECOSERVE_SERVE_ARGS ?? '').split(/\s+/).filter((a) => a.length > 0);
  child = spawn(bin, ['serve', '--model', modelFile, '--port', '0', '--threads', '1', '--api-key', 'node-key', ...extra],
                { stdio: ['ignore', 'pipe', 'inherit'] });
  baseURL = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('ecoserve did not print its URL in 30 s')), 30000);
    child.stdout.on('data', (d) => {
      out += d.toString();
      const m = out.match(/ecoserve listening on (http:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`ecoserve exited with ${code}`)); });
  });
});

after(async () => {
  if (!child) return;
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  assert.equal(await exited, 0, 'SIGTERM drains and exits 0');
});

function client() {
  return new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: process.env.ECOSERVE_API_KEY ?? 'node-key', maxRetries: 0 });
}

async function servedModel(c) {
  const models = await c.models.list();
  assert.ok(models.data.length >= 1);
  return models.data[0].id;
}

test('streaming chat completion', async (t) => {
  if (skip) return t.skip(skip);
  const c = client();
  const model = await servedModel(c);
  const stream = await c.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Tell me a story about a cat.' }],
    max_tokens: 16,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let role = null;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta?.role) role = role ?? choice.delta.role;
      text += choice.delta?.content ?? '';
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  assert.ok(text.length > 0, 'some text was streamed');
  assert.ok(finish === 'length' || finish === 'stop', `finish_reason ${finish}`);
  assert.ok(usage && usage.completion_tokens >= 1 && usage.completion_tokens <= 16);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
});

test('plain completion', async (t) => {
  if (skip) return t.skip(skip);
  const c = client();
  const model = await servedModel(c);
  const r = await c.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.ok(r.choices[0].text.length > 0);
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);
  // Greedy decoding is deterministic.
  const again = await c.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert.equal(again.choices[0].text, r.choices[0].text);
});

test('errors arrive as OpenAI API errors', async (t) => {
  if (skip) return t.skip(skip);
  const c = client();
  await assert.rejects(c.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 1 }),
                       (e) => e.status === 404);
  await assert.rejects(c.completions.create({ model: await servedModel(c), prompt: 'x', temperature: -1 }),
                       (e) => e.status === 400);
});
