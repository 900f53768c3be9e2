// Style sheets imported by the browser code are bundled by esbuild (src/web/build.mjs).
declare module '*.css';
