// llama.cpp's speed on this machine, through the prebuilt CPU build in the
// node-llama-cpp package (not a test; scripts/compare_llamacpp.sh runs it
// beside `ecoserve profile engine`).
// Usage: node bench_llamacpp.mjs MODEL.gguf [THREADS]
// Prints pp512 (one 512-token prompt, best of 3) and decode tok/s (128 single
// tokens after a 16-token prompt; each call also pays node-llama-cpp's
// JS-to-C++ hop, so this slightly understates llama.cpp's own tg128).
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';

const [, , modelPath, threadsArg = '1'] = process.argv;
if (!modelPath) {
  console.error('usage: node bench_llamacpp.mjs MODEL.gguf [THREADS]');
  process.exit(2);
}
const threads = Number(threadsArg);
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: false });
const ctx = await model.createContext({ contextSize: 1024, threads, batchSize: 512, sequences: 1 });
const seq = ctx.getSequence();
const prompt = Array.from({ length: 512 }, (_, i) => 1000 + ((i * 37) % 20000));
let best = Infinity;
for (let r = 0; r < 3; ++r) {
  await seq.clearHistory();
  const t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(prompt);
  best = Math.min(best, performance.now() - t0);
}
await seq.clearHistory();
await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, 16));
const t0 = performance.now();
for (let i = 0; i < 128; ++i) await seq.evaluateWithoutGeneratingNewTokens([2000 + i]);
const decode = 128 / ((performance.now() - t0) / 1000);
console.log(JSON.stringify({ threads, pp512: 512 / (best / 1000), decode }));
process.exit(0);
