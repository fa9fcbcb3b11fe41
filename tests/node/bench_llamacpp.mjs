// llama.cpp's speed on this machine through node-llama-cpp's own JS API (not a
// test; scripts/compare_llamacpp.sh runs it beside `ecoserve profile engine`
// and beside llamacpp_native_bench, which times the same library's loop in C++).
// Usage: node bench_llamacpp.mjs MODEL.gguf [THREADS] [--prompt-len P] [--context C] [--steps S] [--kv f16|f32]
// Prints one JSON object:
//   pp       prefill tok/s of one P-token prompt (best of 3)
//   decode   tok/s of S tokens after C tokens of context, through
//            sequence.evaluate() with temperature 0: each token computes the
//            logits of its position and is sampled greedily, and each token
//            pays node-llama-cpp's JS-to-C++ hops (two async native calls,
//            decodeBatch and sampleToken, plus its JS batching)
//   cpu_variant  the libggml-cpu-*.so that ggml picked for this CPU
// Prompt ids: a fixed English text through the model's own tokenizer, no
// control tokens, repeated (valid for any vocabulary size).
import { readFileSync } from 'node:fs';
import { getLlama, GgmlType, LlamaLogLevel } from 'node-llama-cpp';

const positional = [];
const opts = { 'prompt-len': 512, context: 128, steps: 128, kv: 'f16' };
for (let i = 2; i < process.argv.length; ++i) {
  const a = process.argv[i];
  if (a.startsWith('--')) opts[a.slice(2)] = process.argv[++i];
  else positional.push(a);
}
const [modelPath, threadsArg = '1'] = positional;
if (!modelPath || !['f16', 'f32'].includes(opts.kv)) {
  console.error('usage: node bench_llamacpp.mjs MODEL.gguf [THREADS] [--prompt-len P] [--context C] [--steps S] [--kv f16|f32]');
  process.exit(2);
}
const threads = Number(threadsArg);
const promptLen = Number(opts['prompt-len']);
const context = Number(opts.context);
const steps = Number(opts.steps);
const kvType = opts.kv.toUpperCase();  // GgmlType key: F16 or F32

const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: false });
const ctx = await model.createContext({
  contextSize: Math.max(promptLen, context + steps + 1),
  threads,
  batchSize: promptLen,
  sequences: 1,
  flashAttention: false,
  experimentalKvCacheKeyType: kvType,
  experimentalKvCacheValueType: kvType,
});
if (ctx.kvCacheKeyType !== GgmlType[kvType] || ctx.kvCacheValueType !== GgmlType[kvType]) throw new Error(`KV cache is not ${kvType}`);
const seq = ctx.getSequence();

// The CPU build variant ggml loaded (it unloads the ones it only scored).
const cpuVariant = (readFileSync('/proc/self/maps', 'utf8').match(/libggml-cpu-([\w-]+)\.so/) ?? [, 'unknown'])[1];

const text = ' Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her ' +
  'friends. One day, she saw a big red ball under a tree and ran to get it. The sun was warm and the birds were singing.';
const ids = model.tokenize(text, false).filter((t) => !model.isSpecialToken(t));
if (ids.length === 0) throw new Error("the model's tokenizer gave no tokens for the prompt text");
const tokens = Array.from({ length: Math.max(promptLen, context + 1) }, (_, i) => ids[i % ids.length]);

let best = Infinity;
for (let r = 0; r < 3; ++r) {
  await seq.clearHistory();
  const t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(0, promptLen));
  best = Math.min(best, performance.now() - t0);
}

// Decode: the context untimed, then `steps` generated tokens. The generator
// evaluates its input with logits for the last position, samples greedily
// (temperature 0 puts llama.cpp's greedy sampler in the chain) and feeds the
// pick back; yieldEogToken keeps it going past an end-of-generation token.
await seq.clearHistory();
await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(0, context));
const gen = seq.evaluate([tokens[context]], { temperature: 0, yieldEogToken: true });
const t0 = performance.now();
for (let i = 0; i < steps; ++i) {
  const { done } = await gen.next();
  if (done) throw new Error(`generation stopped after ${i} tokens`);
}
const decodeMs = performance.now() - t0;
await gen.return();
if (seq.nextTokenIndex !== context + steps) throw new Error(`expected ${context + steps} tokens in the sequence, got ${seq.nextTokenIndex}`);

console.log(JSON.stringify({
  threads, prompt_len: promptLen, context, decode_steps: steps, kv_cache_type: opts.kv, cpu_variant: cpuVariant,
  pp: promptLen / (best / 1000), decode: steps / (decodeMs / 1000),
}));
process.exit(0);
