// Development server for the Admin UI (Node 20, no dependencies).
//
// Serves src/http/ui/ at /web/<path> the way the node will once it embeds the files (content type
// from the extension, ETag, the security headers), answers `GET /` and `GET /web` with a 302 to the
// relative Location `web/index.html`, and proxies every other path to a node: method, headers
// (Authorization included), body; the node's status, reason phrase, headers and body come back
// unchanged, long polls included.
//
//   node tests/ui/devserver.mjs --node http://127.0.0.1:2113 [--port 8080] [--host 127.0.0.1]
//        [--root src/http/ui] [--prefix /some/prefix]
//
// --port 0 picks a free port. The line `devserver listening on http://HOST:PORT/` on stdout tells
// where it listens (scripts wait for it). --prefix serves everything under a path prefix, as a
// reverse proxy mounting the node at /some/prefix/ would (the prefix is stripped before proxying),
// to check that the UI only uses relative URLs.

import http from 'node:http';
import fs from 'node:fs/promises';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
  const out = { node: null, port: 8080, host: '127.0.0.1', root: path.resolve(here, '../../src/http/ui'), prefix: '' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--node') out.node = next();
    else if (a === '--port') out.port = Number(next());
    else if (a === '--host') out.host = next();
    else if (a === '--root') out.root = path.resolve(next());
    else if (a === '--prefix') out.prefix = next().replace(/\/+$/, '');
    else if (a === '--help' || a === '-h') {
      console.log('usage: node tests/ui/devserver.mjs --node http://127.0.0.1:PORT [--port N] [--host IP] [--root DIR] [--prefix /p]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!out.node) throw new Error('--node http://HOST:PORT is required');
  if (out.prefix && !out.prefix.startsWith('/')) out.prefix = '/' + out.prefix;
  return out;
}

const opts = parseArgs(process.argv.slice(2));
const node = new URL(opts.node);

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};

/** The headers every UI response carries (the node will send the same). */
const SECURITY = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

/** Hop-by-hop headers, never forwarded in either direction. */
const HOP = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'proxy-connection',
]);

function redirect(res) {
  // Relative to the request's own path: `/` → `web/index.html`, `/web` → `web/index.html`
  // (resolved against `/web` that is `/web/index.html`, as the node will answer).
  res.writeHead(302, { location: 'web/index.html', 'content-type': 'text/plain; charset=utf-8', ...SECURITY });
  res.end('Moved');
}

async function serveStatic(req, res, rel) {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', ...SECURITY });
    return res.end();
  }
  const decoded = decodeURIComponent(rel);
  const file = path.resolve(opts.root, '.' + path.posix.normalize('/' + decoded));
  if (!file.startsWith(opts.root + path.sep)) {
    res.writeHead(404, SECURITY);
    return res.end();
  }
  const type = TYPES[path.extname(file).toLowerCase()];
  let body;
  try {
    if (!type) throw new Error('type');
    body = await fs.readFile(file);
  } catch {
    res.writeHead(404, 'Not Found', { 'content-type': 'text/plain; charset=utf-8', ...SECURITY });
    return res.end('Not Found');
  }
  const etag = '"' + crypto.createHash('sha256').update(body).digest('base64url').slice(0, 22) + '"';
  const headers = { 'content-type': type, etag, 'cache-control': 'no-cache', ...SECURITY };
  if (req.headers['if-none-match'] === etag) {
    res.writeHead(304, headers);
    return res.end();
  }
  headers['content-length'] = body.length;
  res.writeHead(200, headers);
  res.end(req.method === 'HEAD' ? undefined : body);
}

function proxy(req, res, pathAndQuery) {
  const headers = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (!HOP.has(k)) headers[k] = v;
  }
  if (opts.prefix) headers['x-forwarded-prefix'] = opts.prefix;
  const up = http.request(
    { protocol: node.protocol, hostname: node.hostname, port: node.port, method: req.method, path: pathAndQuery, headers },
    (upRes) => {
      const out = {};
      for (const [k, v] of Object.entries(upRes.headers)) {
        if (!HOP.has(k)) out[k] = v;
      }
      res.writeHead(upRes.statusCode, upRes.statusMessage, out);
      upRes.pipe(res);
    },
  );
  up.on('error', (e) => {
    if (!res.headersSent) {
      res.writeHead(502, 'Bad Gateway: node unreachable', { 'content-type': 'text/plain; charset=utf-8' });
    }
    res.end(`node unreachable: ${e.message}`);
  });
  req.on('aborted', () => up.destroy());
  res.on('close', () => up.destroy());
  req.pipe(up);
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  let p = url.pathname;
  if (opts.prefix) {
    if (p === opts.prefix) p = '/';
    else if (p.startsWith(opts.prefix + '/')) p = p.slice(opts.prefix.length);
    else {
      res.writeHead(404, 'Outside the prefix');
      return res.end();
    }
  }
  if ((p === '/' || p === '/web') && (req.method === 'GET' || req.method === 'HEAD')) return redirect(res);
  if (p.startsWith('/web/')) {
    serveStatic(req, res, p.slice('/web/'.length)).catch((e) => {
      res.writeHead(500);
      res.end(String(e));
    });
    return;
  }
  proxy(req, res, p + url.search);
});
server.keepAliveTimeout = 65_000;
server.requestTimeout = 0;
server.headersTimeout = 60_000;

server.listen(opts.port, opts.host, () => {
  const a = server.address();
  console.log(`devserver listening on http://${opts.host}:${a.port}${opts.prefix}/ (node ${node.origin}, ui ${opts.root})`);
});

for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
