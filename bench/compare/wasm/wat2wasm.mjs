// wat2wasm: turns a WAT file into a core wasm module with wasm-tools' parser
// from maiden's pinned JS toolchain (the one `maiden build` installs), so
// that bench/compare needs no other WebAssembly tooling.
//
//   node wat2wasm.mjs TOOLCHAIN_DIR IN.wat OUT.wasm
//
// TOOLCHAIN_DIR is toolbuild.Toolchain.Dir(): it holds node_modules.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [dir, input, output] = process.argv.slice(2);
if (!output) {
  console.error('usage: node wat2wasm.mjs TOOLCHAIN_DIR IN.wat OUT.wasm');
  process.exit(2);
}
const wasmTools = await import(
  pathToFileURL(join(dir, 'node_modules', '@bytecodealliance', 'jco-transpile', 'dist', 'wasm-tools.js')).href
);
await writeFile(output, await wasmTools.parse(await readFile(input, 'utf8')));
