// Start nodens with the external `hello` plugin placed just before `whoami`:
//   node examples/external-plugin/run.ts      then   dig @127.0.0.1 -p 1054 example.org TXT
import { startServer } from '../../src/index.ts';
import { hello } from './hello.ts';

const server = await startServer({
  corefile: '.:1054 {\n  hello "hello from a TypeScript plugin"\n  whoami\n  log\n}\n',
  plugins: [{ plugin: hello, before: 'whoami' }],
});
process.stdout.write(`listening on ${JSON.stringify(server.addresses())}\n`);
process.on('SIGINT', () => { void server.stop().then(() => process.exit(0)); });
