// Fails the build if the view would load anything: no src/href on tags, no remote url() or @import in its CSS.
import { readFileSync } from "node:fs";

const path = process.argv[2];
const html = readFileSync(path, "utf8");
const problems = [];
for (const match of html.matchAll(/<(script|link|img|iframe|source|video|audio|embed|object)\b[^>]*\b(src|href|data)\s*=\s*["']?([^"'\s>]+)/gi)) {
  problems.push(`<${match[1]} ${match[2]}=${match[3]}>`);
}
for (const match of html.matchAll(/(url\(\s*["']?(?:https?:)?\/\/[^)]*\)|@import\s+["']?(?:https?:)?\/\/\S+)/gi)) {
  problems.push(match[1]);
}
if (problems.length > 0) {
  console.error(`${path} loads from outside itself:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`${path}: self-contained (${html.length} bytes)`);
