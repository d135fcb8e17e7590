// mcpoll test peer on the official TypeScript SDK v1 (@modelcontextprotocol/sdk 1.32.2).
// Legacy protocol only (latest 2025-11-25): initialize handshake; Mcp-Session-Id sessions on HTTP.
//
//   node ts1_server.mjs stdio        newline-delimited JSON-RPC on stdin/stdout, logs on stderr
//   node ts1_server.mjs http PORT    Streamable HTTP at http://127.0.0.1:PORT/mcp (loopback only,
//                                    one McpServer + transport per session)
//
// The wire-visible names and texts match the recorded lab transcripts, which the Rust tests compare with.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import * as z from 'zod';

const INFO = { name: 'lab-ts1', version: '0.1.0' };
const HOST = '127.0.0.1';

// Process-wide state shared by every connection / session.
const notes = [];
let extraCount = 0;
const connected = new Set(); // McpServer instances with a live transport (bump_tools updates them all)

// LAB_TASKS=1: the SDK's experimental tasks (2025-11-25 core form): the `tasks` capability and
// the tool `slow_task(ms)` (taskSupport "optional"). Off by default, so the surface the other
// tests and the lab transcripts see is unchanged. One store for the process: a task outlives
// the session that made it (the SDK's store scopes tasks to a session id only when given one;
// this peer passes none, as a server with no authorization context of its own would).
const TASKS = process.env.LAB_TASKS === '1';
const sdkTaskStore = new InMemoryTaskStore();
const taskStore = {
    createTask: (params, requestId, request) => sdkTaskStore.createTask(params, requestId, request),
    getTask: taskId => sdkTaskStore.getTask(taskId),
    storeTaskResult: (taskId, status, result) => sdkTaskStore.storeTaskResult(taskId, status, result),
    getTaskResult: taskId => sdkTaskStore.getTaskResult(taskId),
    updateTaskStatus: (taskId, status, message) => sdkTaskStore.updateTaskStatus(taskId, status, message),
    listTasks: cursor => sdkTaskStore.listTasks(cursor)
};

const log = (...args) => console.error(...args);
const text = t => ({ content: [{ type: 'text', text: t }] });

// setTimeout that rejects when the request's AbortSignal fires (notifications/cancelled).
function pause(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason ?? new Error('aborted'));
        const timer = setTimeout(resolve, ms);
        signal?.addEventListener('abort', () => {
            clearTimeout(timer);
            reject(signal.reason ?? new Error('aborted'));
        }, { once: true });
    });
}

// `slow_task(ms)`: a task that works in 100 ms steps (status message `step i/n`), then
// completes with `slept <ms> ms`; it stops when the task is cancelled (logs `[task] cancelled`).
function registerTaskTool(server) {
    server.experimental.tasks.registerToolTask('slow_task', {
        description: 'Sleep `ms` milliseconds as a task, in 100 ms steps; cancellable.',
        inputSchema: { ms: z.number() },
        execution: { taskSupport: 'optional' }
    }, {
        async createTask({ ms }, { taskStore: store, taskRequestedTtl }) {
            const task = await store.createTask({ ttl: taskRequestedTtl ?? 60000, pollInterval: 200 });
            log(`[task] created ${task.taskId}`);
            (async () => {
                const total = Math.max(1, Math.floor(ms / 100));
                for (let step = 1; step <= total; step++) {
                    await new Promise(resolve => setTimeout(resolve, ms / total));
                    const now = await taskStore.getTask(task.taskId);
                    if (!now || now.status === 'cancelled') {
                        log('[task] cancelled');
                        return;
                    }
                    if (step < total) {
                        await taskStore.updateTaskStatus(task.taskId, 'working', `step ${step}/${total}`);
                    }
                }
                await taskStore.storeTaskResult(task.taskId, 'completed', text(`slept ${ms} ms`));
                log(`[task] completed ${task.taskId}`);
            })().catch(e => log('[task] error:', e?.message ?? e));
            return { task };
        },
        async getTask(_args, { taskId }) {
            return await taskStore.getTask(taskId);
        },
        async getTaskResult(_args, { taskId }) {
            return await taskStore.getTaskResult(taskId);
        }
    });
}

function addExtraTool(server, n) {
    server.registerTool(`extra_${n}`, { description: `Tool added by bump_tools #${n}` },
        async () => text(`extra tool ${n}`));
}

// SDK v1 takes raw zod shapes (not z.object) for inputSchema / outputSchema / argsSchema.
function makeServer() {
    const capabilities = { tools: { listChanged: true } };
    if (TASKS) capabilities.tasks = { list: {}, cancel: {}, requests: { tools: { call: {} } } };
    const server = new McpServer(INFO, TASKS ? { capabilities, taskStore } : { capabilities });
    if (TASKS) registerTaskTool(server);

    server.registerTool('echo', {
        description: 'Echo back the `text` argument.',
        inputSchema: { text: z.string() },
        annotations: { readOnlyHint: true }
    }, async args => text(args.text));

    server.registerTool('add', {
        description: 'Add a and b; returns structuredContent {sum}.',
        inputSchema: { a: z.number(), b: z.number() },
        outputSchema: { sum: z.number() },
        annotations: { readOnlyHint: true }
    }, async ({ a, b }) => {
        const structuredContent = { sum: a + b };
        return { ...text(JSON.stringify(structuredContent)), structuredContent };
    });

    server.registerTool('slow', {
        description: 'Sleep `ms` milliseconds, reporting progress every 100 ms; cancellable.',
        inputSchema: { ms: z.number() }
    }, async ({ ms }, extra) => {
        const progressToken = extra._meta?.progressToken;
        const total = Math.max(1, Math.floor(ms / 100));
        for (let step = 1; step <= total; step++) {
            await pause(ms / total, extra.signal);
            log(`[slow] step ${step}/${total}`);
            if (progressToken !== undefined) {
                await extra.sendNotification({
                    method: 'notifications/progress',
                    params: { progressToken, progress: step, total, message: `step ${step}/${total}` }
                });
            }
        }
        return text(`slept ${ms} ms`);
    });

    server.registerTool('fail', { description: 'Always fails with isError true.' },
        async () => ({ ...text('this tool always fails'), isError: true }));

    server.registerTool('write_note', {
        description: 'Append a note to an in-memory list; returns the count (non-idempotent).',
        inputSchema: { note: z.string() },
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false }
    }, async ({ note }) => {
        notes.push(note);
        return text(String(notes.length));
    });

    server.registerTool('bump_tools', {
        description: 'Register a new tool at runtime and emit tools list_changed.'
    }, async () => {
        const n = ++extraCount;
        // registerTool on a connected McpServer emits notifications/tools/list_changed by itself
        // (stdout on stdio, the session's standalone GET stream on HTTP): no explicit send.
        for (const s of connected) addExtraTool(s, n);
        return text(`added extra_${n}`);
    });
    for (let n = 1; n <= extraCount; n++) addExtraTool(server, n);

    // Server requests (2025-11-25 JSON-RPC requests mid-call), sent on the call's own stream
    // (relatedRequestId: the POST's SSE response on HTTP), as py_server.py's tools do.
    const related = extra => ({ relatedRequestId: extra.requestId });
    const form = (name, prop) => ({ type: 'object', properties: { [name]: prop } });
    server.registerTool('ask', {
        description: 'Elicit a name, then a confirmation (form mode); returns what was given.'
    }, async extra => {
        const name = await server.server.elicitInput({ message: 'What is your name?',
            requestedSchema: form('name', { type: 'string', default: 'Ann' }) }, related(extra));
        const who = name.content?.name ?? '?';
        const confirm = await server.server.elicitInput({ message: `Greet ${who}?`,
            requestedSchema: form('ok', { type: 'boolean', default: true }) }, related(extra));
        return text(`name=${who} ok=${confirm.content?.ok}`);
    });
    server.registerTool('roots', { description: "List the client's roots; returns their URIs." },
        async extra => {
            const listing = await server.server.listRoots({}, related(extra));
            return text(listing.roots.map(r => r.uri).join(','));
        });
    server.registerTool('sample', { description: "Sample the client's model; returns the text it gave." },
        async extra => {
            const reply = await server.server.createMessage({ maxTokens: 16,
                messages: [{ role: 'user', content: { type: 'text', text: 'Say hello' } }] }, related(extra));
            return text(reply.content?.text ?? '?');
        });

    server.registerResource('readme', 'lab://readme',
        { description: 'A static text resource', mimeType: 'text/plain' },
        async uri => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'MCP lab resource (ts1)' }] }));

    server.registerPrompt('greet', {
        description: 'Greet someone',
        argsSchema: { name: z.string() }
    }, ({ name }) => ({
        messages: [{ role: 'user', content: { type: 'text', text: `Please greet ${name} warmly.` } }]
    }));

    return server;
}

async function serveStdio() {
    const server = makeServer();
    connected.add(server);
    await server.connect(new StdioServerTransport());
}

// Body of a POST: parsed JSON, undefined when empty, or { unparsable: raw } when not JSON.
async function readBody(req) {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const raw = Buffer.concat(chunks).toString('utf8');
    if (raw === '') return undefined;
    try {
        return JSON.parse(raw);
    } catch {
        return { unparsable: raw };
    }
}

function serveHttp(port) {
    const sessions = new Map(); // Mcp-Session-Id -> StreamableHTTPServerTransport

    async function openSession() {
        const server = makeServer();
        const transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            enableDnsRebindingProtection: true,
            allowedHosts: [`${HOST}:${port}`, `localhost:${port}`],
            onsessioninitialized: id => sessions.set(id, transport)
        });
        transport.onclose = () => {
            if (transport.sessionId) sessions.delete(transport.sessionId);
            connected.delete(server);
        };
        await server.connect(transport);
        connected.add(server);
        return transport;
    }

    async function route(req, res) {
        if (new URL(req.url ?? '/', 'http://localhost').pathname !== '/mcp') {
            res.writeHead(404).end('not found');
            return;
        }
        const body = req.method === 'POST' ? await readBody(req) : undefined;

        if (body?.unparsable !== undefined) {
            // Hand malformed JSON to a throwaway stateless transport so the SDK answers it in its own words.
            const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
            await makeServer().connect(transport);
            await transport.handleRequest(req, res, body.unparsable);
            return;
        }

        const sid = req.headers['mcp-session-id'];
        let transport = typeof sid === 'string' ? sessions.get(sid) : undefined;
        if (!transport && sid === undefined && req.method === 'POST' && isInitializeRequest(body)) {
            transport = await openSession();
        }
        if (!transport) {
            // The wording of the SDK's own Streamable HTTP example for a missing or unknown session.
            res.writeHead(400, { 'Content-Type': 'application/json' }).end(JSON.stringify({
                jsonrpc: '2.0',
                error: { code: -32000, message: 'Bad Request: No valid session ID provided' },
                id: body?.id ?? null
            }));
            return;
        }
        await transport.handleRequest(req, res, body);
    }

    const httpServer = http.createServer((req, res) => {
        route(req, res).catch(e => {
            log('[ts1-http] error:', e?.message ?? e);
            if (!res.headersSent) res.writeHead(500).end();
        });
    });
    httpServer.on('error', e => {
        log(`[ts1-http] cannot listen on ${HOST}:${port}: ${e?.message ?? e}`);
        process.exit(1);
    });
    httpServer.listen(port, HOST, () => log(`[ts1-http] listening on http://${HOST}:${port}/mcp`));
}

const [mode = 'stdio', portArg] = process.argv.slice(2);
if (mode === 'stdio') {
    await serveStdio();
} else if (mode === 'http' && /^\d+$/.test(portArg ?? '')) {
    serveHttp(Number(portArg));
} else {
    log('usage: node ts1_server.mjs stdio | http PORT');
    process.exit(2);
}
