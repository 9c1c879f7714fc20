// Generates TypeScript interfaces from exported contract schemas with json-schema-to-typescript
// (the generator TypeScript consumer teams commonly use) and prints them: a schema it cannot
// read fails with exit 1.
import { compileFromFile } from 'json-schema-to-typescript';
for (const file of process.argv.slice(2)) {
  process.stdout.write(await compileFromFile(file, { bannerComment: '' }));
}
