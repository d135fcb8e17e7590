// mcpoll test peer on the official TypeScript SDK v2 (@modelcontextprotocol/server 2.4.0,
// @modelcontextprotocol/node 2.1.2). Speaks 2026-07-28 and 2025-11-25.
//
//   node ts2_server.mjs stdio        newline-delimited JSON-RPC on stdin/stdout, logs on stderr
//   node ts2_server.mjs http PORT    Streamable HTTP at http://127.0.0.1:PORT/mcp (loopback only;
//                                    stateless: the SDK builds one McpServer per request)
//
// The wire-visible names and texts match the recorded lab transcripts, which the Rust tests compare with.
import http from 'node:http';
import { McpServer, acceptedContent, createMcpHandler, inputRequired, inputResponse } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { toNodeHandler, localhostHostValidation, localhostOriginValidation } from '@modelcontextprotocol/node';
import * as z from 'zod';

const INFO = { name: 'lab-ts2', version: '0.1.0' };
const HOST = '127.0.0.1';

// Process-wide state. Over HTTP every request gets a fresh McpServer from makeServer(), so
// anything that must outlive a request (notes, tools added by bump_tools) lives out here.
const notes = [];
let extraCount = 0;
let announceToolsChanged = () => {}; // HTTP: set to the handler's notifier for subscriptions/listen

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

function addExtraTool(server, n) {
    server.registerTool(`extra_${n}`, { description: `Tool added by bump_tools #${n}` },
        async () => text(`extra tool ${n}`));
}

// Over HTTP a request may carry `Authorization: Bearer tok-<name>`: the peer then serves
// principal <name> (the SDK's authInfo, passed to the factory), who also gets `whoami` and a
// tool of its own, `<name>_notes`. Its tool list is marked private and its prompt list public,
// both cacheable for a minute. Without a token the surface is the lab's, unchanged.
function principalOf(authInfo) {
    return authInfo?.clientId;
}

function makeServer(ctx) {
    const who = principalOf(ctx?.authInfo);
    const cacheHints = who === undefined ? undefined : {
        'tools/list': { ttlMs: 60000, cacheScope: 'private' },
        'prompts/list': { ttlMs: 60000, cacheScope: 'public' }
    };
    const server = new McpServer(INFO, {
        capabilities: { tools: { listChanged: true }, resources: {}, prompts: {} },
        ...(cacheHints ? { cacheHints } : {})
    });

    if (who !== undefined) {
        server.registerTool('whoami', {
            description: 'The principal whose bearer token this request carried.',
            annotations: { readOnlyHint: true }
        }, async () => text(who));
        server.registerTool(`${who}_notes`, {
            description: `Notes only ${who} can see.`,
            annotations: { readOnlyHint: true }
        }, async () => text(`notes of ${who}`));
    }

    server.registerTool('echo', {
        description: 'Echo back the `text` argument.',
        inputSchema: z.object({ text: z.string() }),
        annotations: { readOnlyHint: true }
    }, async args => text(args.text));

    server.registerTool('add', {
        description: 'Add a and b; returns structuredContent {sum}.',
        inputSchema: z.object({ a: z.number(), b: z.number() }),
        outputSchema: z.object({ sum: z.number() }),
        annotations: { readOnlyHint: true }
    }, async ({ a, b }) => {
        const structuredContent = { sum: a + b };
        return { ...text(JSON.stringify(structuredContent)), structuredContent };
    });

    server.registerTool('slow', {
        description: 'Sleep `ms` milliseconds, reporting progress every 100 ms; cancellable.',
        inputSchema: z.object({ ms: z.number() })
    }, async ({ ms }, ctx) => {
        const req = ctx.mcpReq;
        const progressToken = req._meta?.progressToken;
        const total = Math.max(1, Math.floor(ms / 100));
        for (let step = 1; step <= total; step++) {
            try {
                await pause(ms / total, req.signal);
            } catch (e) {
                // The request's signal fired: notifications/cancelled, or (2026-07-28 over
                // HTTP) the client closed the response stream.
                log('[slow] cancelled');
                throw e;
            }
            log(`[slow] step ${step}/${total}`);
            if (progressToken !== undefined) {
                await req.notify({
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
        inputSchema: z.object({ note: z.string() }),
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false }
    }, async ({ note }) => {
        notes.push(note);
        return text(String(notes.length));
    });

    // Server requests, written once for both eras: on 2026-07-28 the client carries the
    // input_required rounds; on 2025-11-25 the SDK's legacy shim sends real requests mid-call.
    const form = (name, prop) => ({ type: 'object', properties: { [name]: prop } });
    server.registerTool('ask', {
        description: 'Elicit a name, then a confirmation (form mode); returns what was given.'
    }, async ctx => {
        const responses = ctx.mcpReq.inputResponses;
        const state = ctx.mcpReq.requestState();
        const named = acceptedContent(responses, 'name');
        if (state === undefined && !named) {
            return inputRequired({ inputRequests: { name: inputRequired.elicit({
                message: 'What is your name?', requestedSchema: form('name', { type: 'string', default: 'Ann' })
            }) } });
        }
        // The second round carries the name in requestState (a test peer: not integrity-protected).
        const who = state !== undefined ? JSON.parse(state).name : named.name;
        const confirmed = acceptedContent(responses, 'confirm');
        if (!confirmed) {
            return inputRequired({ inputRequests: { confirm: inputRequired.elicit({
                message: `Greet ${who}?`, requestedSchema: form('ok', { type: 'boolean', default: true })
            }) }, requestState: JSON.stringify({ name: who }) });
        }
        return text(`name=${who} ok=${confirmed.ok}`);
    });
    server.registerTool('roots', { description: "List the client's roots; returns their URIs." },
        async ctx => {
            const v = inputResponse(ctx.mcpReq.inputResponses, 'roots');
            if (v.kind !== 'roots') return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
            return text(v.roots.map(r => r.uri).join(','));
        });
    server.registerTool('sample', { description: "Sample the client's model; returns the text it gave." },
        async ctx => {
            const v = inputResponse(ctx.mcpReq.inputResponses, 'model');
            if (v.kind !== 'sampling') {
                return inputRequired({ inputRequests: { model: inputRequired.createMessage({ maxTokens: 16,
                    messages: [{ role: 'user', content: { type: 'text', text: 'Say hello' } }] }) } });
            }
            return text(v.result.content?.text ?? '?');
        });
    server.registerTool('sample_tools', {
        description: 'Sample with a get_weather tool offered; returns the tool uses the model chose.'
    }, async ctx => {
        const v = inputResponse(ctx.mcpReq.inputResponses, 'model');
        if (v.kind !== 'sampling') {
            const weather = { name: 'get_weather', description: 'Weather for a city',
                inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
            return inputRequired({ inputRequests: { model: inputRequired.createMessage({ maxTokens: 64,
                messages: [{ role: 'user', content: { type: 'text', text: 'What is the weather in Oslo?' } }],
                tools: [weather], toolChoice: { mode: 'auto' } }) } });
        }
        const blocks = [].concat(v.result.content ?? []);
        const uses = blocks.filter(b => b.type === 'tool_use').map(b => `${b.name} ${JSON.stringify(b.input)}`);
        return text(`${uses.join(';')} stop=${v.result.stopReason}`);
    });

    server.registerTool('bump_tools', {
        description: 'Register a new tool at runtime and emit tools list_changed.'
    }, async () => {
        const n = ++extraCount;
        // registerTool on a connected McpServer already emits notifications/tools/list_changed
        // (stdio: to subscriptions/listen when modern, pushed when legacy). Sending it again by
        // hand would duplicate it.
        addExtraTool(server, n);
        announceToolsChanged();
        return text(`added extra_${n}`);
    });
    for (let n = 1; n <= extraCount; n++) addExtraTool(server, n);

    server.registerResource('readme', 'lab://readme',
        { description: 'A static text resource', mimeType: 'text/plain' },
        async uri => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'MCP lab resource (ts2)' }] }));

    server.registerPrompt('greet', {
        description: 'Greet someone',
        argsSchema: z.object({ name: z.string() })
    }, ({ name }) => ({
        messages: [{ role: 'user', content: { type: 'text', text: `Please greet ${name} warmly.` } }]
    }));

    return server;
}

function serveHttp(port) {
    const handler = createMcpHandler(makeServer, { onerror: e => log('[ts2-http] error:', e?.message ?? e) });
    announceToolsChanged = () => handler.notify.toolsChanged();
    const mcp = toNodeHandler(handler);
    const hostOk = localhostHostValidation();
    const originOk = localhostOriginValidation();
    const httpServer = http.createServer((req, res) => {
        if (!hostOk(req, res) || !originOk(req, res)) return;
        if (new URL(req.url ?? '/', 'http://localhost').pathname !== '/mcp') {
            res.writeHead(404).end('not found');
            return;
        }
        // A test token check, standing in for real verification: `tok-<name>` is principal <name>;
        // any other bearer token is refused. The result reaches the factory as authInfo.
        const auth = req.headers.authorization;
        if (auth !== undefined) {
            const m = /^Bearer tok-([a-z0-9]+)$/.exec(auth);
            if (!m) {
                log('[ts2-http] refused a bearer token');
                res.writeHead(401, { 'WWW-Authenticate': 'Bearer error="invalid_token"' }).end();
                return;
            }
            req.auth = { token: auth.slice('Bearer '.length), clientId: m[1], scopes: [] };
            log(`[ts2-http] principal ${m[1]}`);
        }
        mcp(req, res);
    });
    httpServer.on('error', e => {
        log(`[ts2-http] cannot listen on ${HOST}:${port}: ${e?.message ?? e}`);
        process.exit(1);
    });
    httpServer.listen(port, HOST, () => log(`[ts2-http] listening on http://${HOST}:${port}/mcp`));
}

const [mode = 'stdio', portArg] = process.argv.slice(2);
if (mode === 'stdio') {
    serveStdio(makeServer, { onerror: e => log('[ts2-stdio] error:', e?.message ?? e) });
} else if (mode === 'http' && /^\d+$/.test(portArg ?? '')) {
    serveHttp(Number(portArg));
} else {
    log('usage: node ts2_server.mjs stdio | http PORT');
    process.exit(2);
}
