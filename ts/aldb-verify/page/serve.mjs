// Serves the page and forwards its JSON-RPC calls to a Hyades service, so the browser talks to one
// origin and needs no cross-origin permission (Hyades allows any origin, but a deployment may put
// it behind a proxy that does not). The forwarder is untrusted transport: the page verifies
// everything it shows.
//
//   node page/serve.mjs --hyades http://127.0.0.1:8899 [--addr 127.0.0.1:8080]
//
// GET / and /build/app.js serve the page (build it with `npm run build:page`); POST /rpc is sent
// on to the Hyades URL, bodies up to 1 MiB, answers as they come.
import { createServer } from "node:http";
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const hyades = opt("--hyades");
const [host, port] = opt("--addr", "127.0.0.1:8080").split(":");
if (!hyades) {
  console.error("usage: node page/serve.mjs --hyades URL [--addr HOST:PORT]");
  process.exit(2);
}
const files = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/index.html": ["index.html", "text/html; charset=utf-8"],
  "/build/app.js": ["build/app.js", "text/javascript; charset=utf-8"],
};
const MAX_BODY = 1 << 20;

const server = createServer((req, res) => {
  const path = new URL(req.url ?? "/", "http://x").pathname;
  if (req.method === "GET" && files[path]) {
    const [file, type] = files[path];
    try {
      const body = readFileSync(new URL(file, import.meta.url));
      res.writeHead(200, { "content-type": type, "cache-control": "no-store" }).end(body);
    } catch {
      res.writeHead(500, { "content-type": "text/plain" }).end(`${file} missing: run npm run build:page\n`);
    }
    return;
  }
  if (req.method === "POST" && path === "/rpc") {
    const chunks = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > MAX_BODY) req.destroy();
      else chunks.push(c);
    });
    req.on("end", async () => {
      try {
        const up = await fetch(hyades, { method: "POST", headers: { "content-type": "application/json" }, body: Buffer.concat(chunks) });
        res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/json" }).end(Buffer.from(await up.arrayBuffer()));
      } catch (e) {
        res.writeHead(502, { "content-type": "text/plain" }).end(`Hyades unreachable: ${e.message}\n`);
      }
    });
    return;
  }
  res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
});
server.listen(Number(port), host, () => {
  const a = server.address();
  console.log(`page on http://${a.address}:${a.port}/ forwarding /rpc to ${hyades}`);
});
