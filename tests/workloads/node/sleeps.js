// Off-CPU time in JavaScript: the main thread alternates `sleepTwenty` (blocked 20 ms in
// Atomics.wait, a futex wait inside V8) and `sleepTen` (10 ms), so two thirds of its blocked time is
// under sleepTwenty. Expected off-CPU stack (leaf first): the kernel's futex wait -> libc -> V8's C++
// (FutexEmulation) -> the Atomics.wait builtin -> sleepTwenty|sleepTen -> main.
//
// Usage: node sleeps.js SECONDS [WARMUP_SECONDS] [eof] (see control.js)
'use strict';
const control = require('./control.js');

const cell = new Int32Array(new SharedArrayBuffer(4));

function sleepTwenty() {
  Atomics.wait(cell, 0, 0, 20);
}

function sleepTen() {
  Atomics.wait(cell, 0, 0, 10);
}

function main() {
  const args = process.argv.slice(2);
  control.watch(args);
  const seconds = Number(args[0]);
  const warmup = args.length > 1 && args[1] !== 'eof' ? Number(args[1]) : 0;
  const warmEnd = process.hrtime.bigint() + BigInt(Math.round(warmup * 1e9));
  while (process.hrtime.bigint() < warmEnd) {
    sleepTwenty();
    sleepTen();
  }
  control.ready();
  const end = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  while (!control.over(end)) {
    sleepTwenty();
    sleepTen();
  }
}

main();
