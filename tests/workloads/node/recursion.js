// A JavaScript recursion DEPTH deep with the CPU time at the bottom: past perf's 127 frames, as the
// TypeScript compiler's emitter recurses on deep syntax trees.
//
// Expected stack (leaf first): `bottom` -> `recurse` x (DEPTH + 1) -> `main`.
//
// Usage: node recursion.js SECONDS DEPTH [eof] (see control.js)
'use strict';
const control = require('./control.js');

let sink = 0;

function bottom() {
  let x = sink;
  for (let i = 0; i < 200000; i++) {
    x = Math.imul(x ^ i, 0x9e3779b1);
    x = (x + (x >>> 13)) | 0;
  }
  return x;
}

function recurse(depth) {
  if (depth === 0) {
    return bottom();
  }
  // Not a tail call: every level stays on the stack while bottom runs.
  return (recurse(depth - 1) + depth) | 0;
}

function main(args) {
  const seconds = Number(args[0] || 10);
  const depth = Number(args[1] || 400);
  control.watch(args);
  // Warm up so the optimizing compiler has seen the calls before the recording.
  const warm = process.hrtime.bigint() + 2000000000n;
  while (process.hrtime.bigint() < warm) {
    sink = recurse(depth);
  }
  control.ready();
  const end = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  while (!control.over(end)) {
    sink = recurse(depth);
  }
}

main(process.argv.slice(2));
