// The main thread and one `worker_threads` Worker, each burning CPU in its own functions, with
// garbage enough that V8's platform threads (parallel scavenges, concurrent marking) run too.
//
// Expected stacks: on the main thread, `mainLoop` -> `mainBurn` (-> `mix`); on the Worker (which names
// its thread `js-worker` through /proc/thread-self/comm), `workerMain` -> `workerBurn`, which
// allocates arrays it keeps for a while. V8's own threads run no JavaScript.
//
// Usage: node workers.js SECONDS [eof] (see control.js). Prints "ready" once the Worker burns and, at
// the end, "rounds main=N worker=M" (turns of each burner).
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');

// One turn of a burner, ns.
const TURN_NS = 10000000n;

function mix(x) {
  for (let i = 0; i < 2000; i++) {
    x = Math.imul(x ^ i, 0x85ebca6b);
    x = (x + (x >>> 16)) | 0;
  }
  return x;
}

// Calls `mix` until `deadline`. The loops run in 10 ms turns of a burner, as in split.js: a burner
// called at every turn of its caller's loop would be inlined into that loop's on-stack-replaced
// code, whose frames sonde names by their function alone (see tests/node_workers.rs).
function mainBurn(x, deadline) {
  while (process.hrtime.bigint() < deadline) {
    x = mix(x);
  }
  return x;
}

// Arrays the Worker keeps for a while: they live long enough to be promoted, so the old
// generation fills with garbage and V8 marks and sweeps it on its platform threads.
const ring = new Array(100000);
let slot = 0;

function workerBurn(x, deadline) {
  while (process.hrtime.bigint() < deadline) {
    for (let i = 0; i < 100; i++) {
      const a = new Array(16).fill(x + i);
      x = (x + a[i % 16] * 31) | 0;
      ring[slot] = a;
      slot = (slot + 1) % ring.length;
    }
  }
  return x;
}

function workerMain() {
  require('fs').writeFileSync('/proc/thread-self/comm', 'js-worker');
  const stop = workerData;
  let x = 7;
  let n = 0;
  parentPort.postMessage('burning');
  while (Atomics.load(stop, 0) === 0) {
    x = workerBurn(x, process.hrtime.bigint() + TURN_NS);
    n++;
  }
  parentPort.postMessage(x === 42 ? -n : n);
}

function main(args) {
  const control = require('./control.js');
  const seconds = Number(args[0]);
  control.watch(args);
  const stop = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(__filename, { workerData: stop });
  let workerRounds = null;
  worker.on('message', (m) => {
    if (m === 'burning') {
      mainLoop(seconds, control, stop, () => workerRounds);
    } else {
      workerRounds = m;
    }
  });
}

// Runs once the Worker burns: the main thread's part, then the end.
function mainLoop(seconds, control, stop, workerRounds) {
  control.ready();
  const end = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  let x = 1;
  let n = 0;
  while (!control.over(end)) {
    x = mainBurn(x, process.hrtime.bigint() + TURN_NS);
    n++;
  }
  Atomics.store(stop, 0, 1);
  // The Worker's count arrives on the event loop, after this function returns.
  const report = () => {
    const w = workerRounds();
    if (w === null) {
      setTimeout(report, 10);
      return;
    }
    process.stdout.write(`rounds main=${n} worker=${w} ${x === 42 ? '!' : ''}\n`);
  };
  report();
}

if (isMainThread) {
  main(process.argv.slice(2));
} else {
  workerMain();
}
