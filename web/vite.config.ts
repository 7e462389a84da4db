// Builds the view into dist/assets/app.js and dist/assets/app.css, fixed names the
// Go package embeds and serves (no index.html: the Go package writes the page).
import { defineConfig } from "vite";

export default defineConfig({
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    cssCodeSplit: false,
    modulePreload: false,
    sourcemap: false,
    rolldownOptions: {
      input: "src/main.ts",
      output: {
        entryFileNames: "assets/app.js",
        assetFileNames: "assets/app[extname]",
        codeSplitting: false,
      },
    },
  },
});
