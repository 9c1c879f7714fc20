// Parses an AsyncAPI document with AsyncAPI's own parser (the one its generator and Modelina
// use) and prints every message's payload properties: exit 1 on any error diagnostic or on a
// payload whose `$ref` did not resolve.
import { Parser, fromFile } from '@asyncapi/parser';
const parser = new Parser();
const { document, diagnostics } = await fromFile(parser, process.argv[2]).parse();
const errors = diagnostics.filter(d => d.severity === 0);
for (const d of errors) console.error(JSON.stringify({ code: d.code, message: d.message, path: d.path }));
if (!document || errors.length > 0) { console.error(`invalid: ${errors.length} error(s)`); process.exit(1); }
for (const message of document.messages()) {
  // The payload is a `$ref` to schemas/<event type>.json: resolved, it is that schema.
  const payload = message.payload()?.json() ?? {};
  if (payload['x-event-type'] !== message.id()) {
    console.error(`${message.id()}: payload not resolved: ${JSON.stringify(payload).slice(0, 200)}`);
    process.exit(1);
  }
  console.log(`${message.id()}: ${Object.keys(payload.properties ?? {}).sort().join(',') || '(variants)'}`);
}
console.log(`valid: ${document.channels().length} channel(s), ${document.messages().length} message(s)`);
