// node-run.js runs the edge function under Node, as edgejs runs it under
// goja, for the corpus test: stdin is {src, store, now, requests, events},
// stdout {subjects, responses}. src is cdn.Runnable's.
const vm = require('node:vm');
const crypto = require('node:crypto');
let input = '';
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', async () => {
  const inp = JSON.parse(input);
  const cf = {
    kvs: () => ({
      get: async (k) => {
        if (Object.prototype.hasOwnProperty.call(inp.store, k)) return inp.store[k];
        throw new Error('key not found');
      },
    }),
  };
  const ctx = vm.createContext({ require: (n) => (n === 'cloudfront' ? cf : n === 'crypto' ? crypto : undefined) });
  vm.runInContext('Date.now = () => ' + inp.now + ';', ctx);
  vm.runInContext(inp.src, ctx);
  ctx.__in = JSON.stringify(inp);
  const out = await vm.runInContext(`(async () => {
    const inp = JSON.parse(__in);
    const subjects = inp.requests.map((r) => subject(r));
    const responses = [];
    for (const e of inp.events) {
      const r = await handler(e);
      responses.push(r.statusCode ? JSON.stringify(r) : null);
    }
    return JSON.stringify({ subjects, responses });
  })()`, ctx);
  process.stdout.write(out);
});
