import { defineConfig } from "vite";
import { viteSingleFile } from "vite-plugin-singlefile";

export default defineConfig({
  root: "harness",
  plugins: [viteSingleFile()],
  build: { outDir: "../dist-harness", emptyOutDir: true, rollupOptions: { input: "harness/host.html" } },
});
