// A real JavaScript program from the npm registry: the TypeScript compiler (`typescript@5.9.3`,
// installed by `cargo xtask setup --peers` into target/peers/ts) transpiling its own `lib.es5.d.ts`
// in a loop on the main thread.
//
// Usage: node typescript.js TYPESCRIPT_DIR SECONDS [eof] (see control.js); prints "ready" after the
// first transpilation and "transpiled N" at the end.
'use strict';
const fs = require('fs');
const path = require('path');
const control = require('./control.js');

function main(args) {
  const ts = require(path.join(args[0], 'node_modules/typescript'));
  const lib = path.join(args[0], 'node_modules/typescript/lib/lib.es5.d.ts');
  const source = fs.readFileSync(lib, 'utf8');
  const seconds = Number(args[1]);
  control.watch(args);
  const options = { compilerOptions: { target: ts.ScriptTarget.ES2020 }, fileName: 'lib.es5.ts' };
  ts.transpileModule(source, options);
  control.ready();
  const end = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  let n = 0;
  while (!control.over(end)) {
    ts.transpileModule(source, options);
    n++;
  }
  process.stdout.write(`transpiled ${n}\n`);
}

main(process.argv.slice(2));
