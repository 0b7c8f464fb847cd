'use strict';

// Starts the app on an ephemeral loopback port and talks to it with fetch.
const test = require('node:test');
const assert = require('node:assert/strict');
const { createApp } = require('../server.js');

let server;
let base;

test.before(async () => {
  server = createApp();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}`;
});

test.after(() => new Promise((resolve) => server.close(resolve)));

test('GET /health answers ok', async () => {
  const res = await fetch(`${base}/health`);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { ok: true });
});

test('POST /todos creates a todo that GET /todos lists', async () => {
  const created = await fetch(`${base}/todos`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ title: '  write tests  ' }),
  });
  assert.equal(created.status, 201);
  const todo = await created.json();
  assert.equal(todo.title, 'write tests');
  assert.equal(todo.done, false);

  const list = await (await fetch(`${base}/todos`)).json();
  assert.deepEqual(list, [todo]);
});

test('POST /todos rejects a missing title', async () => {
  const res = await fetch(`${base}/todos`, { method: 'POST', body: '{}' });
  assert.equal(res.status, 400);
});

test('unknown paths are 404', async () => {
  const res = await fetch(`${base}/nope`);
  assert.equal(res.status, 404);
});
