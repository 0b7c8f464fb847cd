'use strict';

// A small todo API on node:http, no dependencies:
//   GET  /health      -> {"ok": true}
//   GET  /todos       -> [{"id": 1, "title": "...", "done": false}, ...]
//   POST /todos       {"title": "..."} -> 201 and the new todo
const http = require('node:http');

function createApp() {
  const todos = [];
  let nextId = 1;

  function send(res, status, body) {
    const data = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(data),
    });
    res.end(data);
  }

  return http.createServer((req, res) => {
    const { pathname } = new URL(req.url, 'http://localhost');
    if (req.method === 'GET' && pathname === '/health') {
      return send(res, 200, { ok: true });
    }
    if (pathname === '/todos' && req.method === 'GET') {
      return send(res, 200, todos);
    }
    if (pathname === '/todos' && req.method === 'POST') {
      let raw = '';
      req.setEncoding('utf8');
      req.on('data', (chunk) => {
        raw += chunk;
        if (raw.length > 64 * 1024) req.destroy();
      });
      req.on('end', () => {
        let input;
        try {
          input = JSON.parse(raw);
        } catch {
          return send(res, 400, { error: 'body must be JSON' });
        }
        if (!input || typeof input.title !== 'string' || input.title.trim() === '') {
          return send(res, 400, { error: 'title is required' });
        }
        const todo = { id: nextId++, title: input.title.trim(), done: false };
        todos.push(todo);
        send(res, 201, todo);
      });
      return;
    }
    send(res, 404, { error: 'not found' });
  });
}

module.exports = { createApp };

if (require.main === module) {
  const port = Number(process.env.PORT || 3000);
  createApp().listen(port, '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${port}`);
  });
}
