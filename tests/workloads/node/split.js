// A 50/30/20 CPU split in JavaScript, measured by the workload itself.
//
// Expected stacks: `main` -> `round` -> `burnA` (50% of the time), `burnB` (30%), `burnC` (20%), each
// calling `step`, a small loop the optimizing compiler may inline into every burner. Each burner runs
// until its deadline in rounds of 100 ms, so a 99 Hz sampler does not alias with the rounds.
//
// Usage: node split.js SECONDS [WARMUP_SECONDS] [eof] (see control.js)
// After the warm-up (not accounted), prints "ready" and, at the end, the time spent in each burner as
// measured with process.hrtime around its calls: "accounted burnA=50.1 burnB=29.9 burnC=20.0", and
// the calls of `step` made meanwhile: "steps N".
'use strict';
const control = require('./control.js');

let sink = 0;
// Calls of `step` since the accounting started: the work done, to compare throughput under
// profilers (`cargo xtask bench`).
let steps = 0;

function step(x) {
  for (let i = 0; i < 2000; i++) {
    x = Math.imul(x ^ i, 0x9e3779b1);
    x = (x + (x >>> 13)) | 0;
  }
  return x;
}

function burnA(deadline) {
  let x = 1;
  while (process.hrtime.bigint() < deadline) {
    x = step(x);
    steps++;
  }
  return x;
}

function burnB(deadline) {
  let x = 2;
  while (process.hrtime.bigint() < deadline) {
    x = step(x);
    steps++;
  }
  return x;
}

function burnC(deadline) {
  let x = 3;
  while (process.hrtime.bigint() < deadline) {
    x = step(x);
    steps++;
  }
  return x;
}

// One 100 ms round; adds each burner's nanoseconds to `spent`.
function round(spent) {
  const t0 = process.hrtime.bigint();
  sink ^= burnA(t0 + 50000000n);
  const t1 = process.hrtime.bigint();
  sink ^= burnB(t1 + 30000000n);
  const t2 = process.hrtime.bigint();
  sink ^= burnC(t2 + 20000000n);
  const t3 = process.hrtime.bigint();
  spent[0] += t1 - t0;
  spent[1] += t2 - t1;
  spent[2] += t3 - t2;
}

function main(args) {
  const seconds = Number(args[0]);
  const warmup = args.length > 1 && args[1] !== 'eof' ? Number(args[1]) : 0;
  control.watch(args);
  const ignored = [0n, 0n, 0n];
  const warmEnd = process.hrtime.bigint() + BigInt(Math.round(warmup * 1e9));
  while (process.hrtime.bigint() < warmEnd) {
    round(ignored);
  }
  control.ready();
  const spent = [0n, 0n, 0n];
  steps = 0;
  const end = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  while (!control.over(end)) {
    round(spent);
  }
  const total = Number(spent[0] + spent[1] + spent[2]);
  const share = (i) => ((100 * Number(spent[i])) / total).toFixed(1);
  process.stdout.write(`accounted burnA=${share(0)} burnB=${share(1)} burnC=${share(2)}\n`);
  process.stdout.write(`steps ${steps}\n`);
  process.stdout.write(sink === 42 ? '\n' : 'done\n');
}

main(process.argv.slice(2));
