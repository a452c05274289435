// Preloaded into a real bin/nodens by tests that need a built-in plugin to throw while it serves
// (NODE_OPTIONS="--import <this file>"): whoami throws for names under panic.test. and answers
// everything else as usual. Nothing under src/ knows about it; it only replaces a method of the
// module that the server loads too: the compiled one under dist/, which bin/nodens runs with
// NODENS_BUNDLE=0 (the bundle in dist/bundle/ has its own copy of the class, out of reach).

import { Whoami } from '../../dist/plugin/whoami/whoami.js';

const serve = Whoami.prototype.serveDNS;
Whoami.prototype.serveDNS = function (this: Whoami, ...args: Parameters<Whoami['serveDNS']>) {
  if (args[0].qname.toLowerCase().endsWith('panic.test.')) throw new Error('whoami-throws: boom\nsecond line');
  return serve.apply(this, args);
};
