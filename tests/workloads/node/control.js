// How the Node.js workloads end: after their SECONDS, or earlier when started with `eof` as their
// last argument and their standard input closes (the tests close it once the recording is over, so
// Node is still alive when sonde names its frames). The main thread burns without yielding to the
// event loop (so `main` stays under every burner), so a worker thread waits for the end of input and
// raises a shared flag the main thread reads between rounds. That worker names its thread `node-eof`
// (every thread of Node is otherwise called `node`), so tests can tell it from V8's own threads.
'use strict';
const { Worker } = require('worker_threads');

// [0]: the input ended; [1]: the waiting worker runs and has named its thread.
const flag = new Int32Array(new SharedArrayBuffer(8));
let watching = false;

function watch(args) {
  if (args[args.length - 1] !== 'eof') {
    return;
  }
  const worker = new Worker(
    `const { workerData } = require('worker_threads');
     const fs = require('fs');
     try { fs.writeFileSync('/proc/thread-self/comm', 'node-eof'); } catch (e) {}
     Atomics.store(workerData, 1, 1);
     Atomics.notify(workerData, 1);
     const buf = Buffer.alloc(64);
     for (;;) {
       let n = 0;
       try { n = fs.readSync(0, buf, 0, buf.length, null); } catch (e) { if (e.code === 'EAGAIN') continue; n = 0; }
       if (n === 0) break;
     }
     Atomics.store(workerData, 0, 1);`,
    { eval: true, workerData: flag },
  );
  worker.unref();
  watching = true;
}

function over(endNs) {
  return Atomics.load(flag, 0) === 1 || process.hrtime.bigint() >= endNs;
}

// Names the calling thread, the main thread, `node-main` and prints "ready". Every thread of Node is
// otherwise called `node` (V8's platform workers too), and profiles carry a thread's name, not its
// id; a thread can rename only itself or its siblings, hence here. Threads the main thread starts
// later inherit the name (the workloads start theirs before, or name them).
function ready() {
  // The waiting worker starts its own Node environment (running JavaScript for a while) and is called
  // `node` until it names itself: wait for that, so no sampled span sees it.
  for (let waited = 0; watching && Atomics.load(flag, 1) === 0 && waited < 100; waited++) {
    Atomics.wait(flag, 1, 0, 100);
  }
  require('fs').writeFileSync('/proc/thread-self/comm', 'node-main');
  process.stdout.write('ready\n');
}

module.exports = { watch, over, ready };
