// A minimal OpenAI-compatible chat-completions server around a local GGUF model, run on the
// CPU by node-llama-cpp's prebuilt llama.cpp. Loopback only. tests/real_model.rs starts it.
//
//   node server.mjs --model FILE.gguf [--port 0] [--ctx 4096] [--threads 1] [--dump-dir DIR]
//
// Prints `listening on http://127.0.0.1:PORT` on stdout once the model is loaded; logs go to
// stderr.
//
// - POST /v1/chat/completions: OpenAI messages (system, user, assistant with tool_calls,
//   tool), `tools`, `max_tokens`, `temperature`; answers with `content` or `tool_calls`,
//   `finish_reason` and `usage`. A request with tools gets llama.cpp's "generic" tool
//   format, as `llama-server --jinja` uses for a model whose chat template has no tool
//   support: the tools are listed in the system prompt and the answer is held by a
//   JSON-schema grammar to `{"tool_call": {"name", "arguments"}}` or `{"response": "..."}`.
//   A prompt that does not fit the context is refused with HTTP 400
//   `exceed_context_size_error`, as llama-server does. One request at a time; a client
//   that hangs up aborts its generation.
// - POST /v1/responses: the OpenAI Responses API as Codex (codex-cli 0.162.0, as prompt-diary
//   0.2.20 starts it) speaks it: `input` items (`message` of role developer/system/user/
//   assistant, `function_call`, `function_call_output`), `instructions`, and the function tools
//   of `tools` and of `additional_tools` input items, namespaces opened (each call is answered
//   with its tool's `namespace`); other tool kinds (Codex's free-form `exec`) are not offered
//   to the model. The request goes through the same chat path as chat completions (one tool
//   call or one message an answer), and the answer is streamed as server-sent events:
//   `response.created`, `response.output_item.added` and `.done` for the one item,
//   `response.completed` with `usage`. `--max-output N` (default 1024) bounds each answer, since
//   Codex sends no limit; a prompt over the context gets a `response.failed` event.
// - GET /props: `{"default_generation_settings": {"n_ctx": N}}`, as llama-server publishes.
// - GET /health.
// - `--dump-dir DIR`: every chat-completions request and what was answered, as
//   DIR/<n>-request.json and DIR/<n>-answer.json (`{"status": S, "body": ...}`).

import fs from "node:fs";
import http from "node:http";
import { getLlama, LlamaChat } from "node-llama-cpp";

const opts = { model: null, port: 0, ctx: 4096, threads: 1, dumpDir: null, maxOutput: 1024 };
for (let i = 2; i < process.argv.length; i++) {
    const [flag, value] = [process.argv[i], process.argv[++i]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === "--model") opts.model = value;
    else if (flag === "--port") opts.port = Number(value);
    else if (flag === "--ctx") opts.ctx = Number(value);
    else if (flag === "--threads") opts.threads = Number(value);
    else if (flag === "--dump-dir") opts.dumpDir = value;
    else if (flag === "--max-output") opts.maxOutput = Number(value);
    else throw new Error(`unknown flag ${flag}`);
}
if (!opts.model) throw new Error("--model is required");
if (opts.dumpDir) fs.mkdirSync(opts.dumpDir, { recursive: true });
const log = (...a) => console.error(new Date().toISOString(), ...a);

const llama = await getLlama({ gpu: false, build: "never", progressLogs: false });
const model = await llama.loadModel({ modelPath: opts.model });
const context = await model.createContext({ contextSize: opts.ctx, threads: opts.threads });
const chat = new LlamaChat({ contextSequence: context.getSequence() });

const textOf = (c) => (c == null ? "" : typeof c === "string" ? c
    : Array.isArray(c) ? c.map((p) => (typeof p === "string" ? p : p?.text ?? "")).join("") : String(c));
const parseJson = (s) => { try { return JSON.parse(s); } catch { return s; } };
const fail = (status, message, type, extra = {}) => Object.assign(new Error(message), { status, type, extra });

// OpenAI messages -> node-llama-cpp chat history. Tool calls and results are shown to the
// model in the same JSON form it is asked to answer in.
function history(messages, tools) {
    const names = new Map();
    const out = [];
    for (const m of messages) {
        if (m.role === "system") out.push({ type: "system", text: textOf(m.content) });
        else if (m.role === "user") out.push({ type: "user", text: textOf(m.content) });
        else if (m.role === "assistant") {
            const calls = m.tool_calls ?? [];
            for (const c of calls) names.set(c.id, c.function?.name);
            const text = calls.length === 0 ? textOf(m.content) : JSON.stringify({
                tool_call: { name: calls[0].function?.name, arguments: parseJson(calls[0].function?.arguments) } });
            out.push({ type: "model", response: [text] });
        } else if (m.role === "tool") {
            out.push({ type: "user", text: JSON.stringify({ tool_response: {
                tool: names.get(m.tool_call_id) ?? "unknown", content: textOf(m.content) } }) });
        } else throw fail(400, `unsupported role ${JSON.stringify(m.role)}`, "invalid_request_error");
    }
    if (tools) {
        const extra = "You can call any of the following tools to satisfy the user's requests: " +
            JSON.stringify(tools.map((t) => t.function), null, 2) +
            "\n\nRespond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the user's request";
        if (out[0]?.type === "system") out[0] = { type: "system", text: out[0].text + "\n\n" + extra };
        else out.unshift({ type: "system", text: extra });
    }
    return out;
}

// The subset of JSON Schema node-llama-cpp makes a grammar of.
function schemaSubset(s) {
    if (s == null || typeof s !== "object") return s;
    const out = {};
    for (const k of ["type", "description", "enum", "const", "required", "minLength", "maxLength"])
        if (k in s) out[k] = s[k];
    if (s.properties) out.properties = Object.fromEntries(
        Object.entries(s.properties).map(([k, v]) => [k, schemaSubset(v)]));
    if ("additionalProperties" in s) out.additionalProperties = typeof s.additionalProperties === "object"
        ? schemaSubset(s.additionalProperties) : s.additionalProperties;
    return out;
}

const grammars = new Map();
async function toolGrammar(tools) {
    const key = JSON.stringify(tools);
    if (!grammars.has(key)) {
        const calls = tools.map((t) => ({ type: "object", properties: {
            name: { const: t.function.name },
            arguments: t.function.parameters ? schemaSubset(t.function.parameters) : { type: "object", properties: {} } } }));
        grammars.set(key, await llama.createGrammarForJsonSchema({ oneOf: [
            { type: "object", properties: { tool_call: calls.length === 1 ? calls[0] : { oneOf: calls } } },
            { type: "object", properties: { response: { type: "string" } } }] }));
    }
    return grammars.get(key);
}

let served = 0;
async function complete(body, signal) {
    if (!Array.isArray(body.messages) || body.messages.length === 0)
        throw fail(400, "messages must be a non-empty array", "invalid_request_error");
    const tools = Array.isArray(body.tools) && body.tools.length > 0 ? body.tools : null;
    const chatHistory = history(body.messages, tools);
    const state = chat.chatWrapper.generateContextState({ chatHistory: [...chatHistory, { type: "model", response: [] }] });
    const promptTokens = state.contextText.tokenize(model.tokenizer).length;
    if (promptTokens >= context.contextSize)
        throw fail(400, "the request exceeds the available context size, try increasing it",
            "exceed_context_size_error", { n_prompt_tokens: promptTokens, n_ctx: context.contextSize });
    const room = context.contextSize - promptTokens - 1;
    const maxTokens = Math.max(1, Math.min(typeof body.max_tokens === "number" ? body.max_tokens : room, room));
    const started = Date.now();
    let generated = 0;
    let firstToken = null;
    const res = await chat.generateResponse(chatHistory, {
        grammar: tools ? await toolGrammar(tools) : undefined,
        maxTokens,
        temperature: typeof body.temperature === "number" ? body.temperature : 0,
        seed: 42,
        signal,
        stopOnAbortSignal: false,
        onToken: (tokens) => { firstToken ??= Date.now(); generated += tokens.length; },
    });
    let content = res.response;
    let calls = [];
    if (tools) {
        const answer = parseJson(res.response);
        if (answer?.tool_call?.name) calls = [{ id: `call_${++served}`, type: "function",
            function: { name: answer.tool_call.name, arguments: JSON.stringify(answer.tool_call.arguments ?? {}) } }];
        else if (typeof answer?.response === "string") content = answer.response;
    }
    // The prompt's time is until the first token (a prefix the previous request shared is
    // not evaluated again); the generation's is from there.
    const ended = Date.now();
    const promptMs = (firstToken ?? ended) - started;
    const genMs = ended - (firstToken ?? ended);
    log(`prompt ${promptTokens} tokens in ${promptMs} ms, ${generated} generated in ${genMs} ms` +
        ` (${generated > 1 && genMs > 0 ? ((generated - 1) * 1000 / genMs).toFixed(1) : "-"} tok/s),` +
        ` ${calls.length} tool calls, stop ${res.metadata?.stopReason}`);
    return {
        id: `chatcmpl-${requests}`, object: "chat.completion", created: Math.floor(Date.now() / 1000),
        model: body.model ?? "local",
        choices: [{ index: 0, finish_reason: calls.length ? "tool_calls" : res.metadata?.stopReason === "maxTokens" ? "length" : "stop",
            message: { role: "assistant", content: calls.length ? null : content, ...(calls.length ? { tool_calls: calls } : {}) } }],
        usage: { prompt_tokens: promptTokens, completion_tokens: generated },
    };
}

// Responses request -> a chat-completions body, and the tools' namespaces by name.
function responsesToChat(body) {
    const namespaces = new Map();
    const tools = [];
    const addTool = (t, ns) => {
        if (t?.type === "namespace") { for (const inner of t.tools ?? []) addTool(inner, t.name); return; }
        if (t?.type !== "function" || !t.name || namespaces.has(t.name)) return;
        namespaces.set(t.name, ns ?? null);
        tools.push({ type: "function", function: { name: t.name, description: t.description ?? "",
            parameters: t.parameters ?? { type: "object", properties: {} } } });
    };
    for (const t of body.tools ?? []) addTool(t);
    const input = Array.isArray(body.input) ? body.input
        : typeof body.input === "string" ? [{ type: "message", role: "user", content: body.input }] : [];
    for (const item of input) if (item?.type === "additional_tools") for (const t of item.tools ?? []) addTool(t);
    const messages = [];
    if (textOf(body.instructions).trim()) messages.push({ role: "system", content: textOf(body.instructions) });
    for (const item of input) {
        if (item?.type === "message" || (item?.role && item?.type === undefined)) {
            const role = item.role === "developer" ? "system" : item.role;
            const content = textOf(item.content);
            // Consecutive system texts become one system message (the chat template has one).
            if (role === "system" && messages.length && messages[messages.length - 1].role === "system"
                && !messages.some((m) => m.role !== "system"))
                messages[messages.length - 1].content += "\n\n" + content;
            else messages.push({ role, content });
        } else if (item?.type === "function_call") {
            messages.push({ role: "assistant", content: null, tool_calls: [{ id: item.call_id, type: "function",
                function: { name: item.name, arguments: item.arguments ?? "{}" } }] });
        } else if (item?.type === "function_call_output") {
            messages.push({ role: "tool", tool_call_id: item.call_id, content: textOf(item.output) });
        }
    }
    return { chat: { messages, tools, max_tokens: opts.maxOutput, temperature: body.temperature }, namespaces };
}

let queue = Promise.resolve();
const oneAtATime = (fn) => { const run = queue.then(fn, fn); queue = run.catch(() => {}); return run; };

let requests = 0;
const server = http.createServer((req, res) => {
    const send = (status, obj) => {
        if (res.writableEnded || res.destroyed) return;
        const text = JSON.stringify(obj);
        res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
        res.end(text);
    };
    const path = new URL(req.url, "http://127.0.0.1").pathname;
    if (req.method === "GET" && path === "/health") return send(200, { status: "ok" });
    if (req.method === "GET" && path === "/props")
        return send(200, { default_generation_settings: { n_ctx: context.contextSize } });
    if (req.method !== "POST" || (path !== "/v1/chat/completions" && path !== "/v1/responses"))
        return send(404, { error: { code: 404, message: `no route ${req.method} ${path}`, type: "not_found_error" } });
    if (path === "/v1/responses") return responses(req, res);
    const n = ++requests;
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
        const dump = (name, obj) => opts.dumpDir && fs.writeFileSync(`${opts.dumpDir}/${n}-${name}.json`, JSON.stringify(obj, null, 1));
        const answer = (status, obj) => { dump("answer", { status, body: obj }); send(status, obj); };
        const raw = Buffer.concat(chunks).toString("utf8");
        let body;
        try { body = JSON.parse(raw); } catch (e) {
            dump("request", { invalid_json: raw.slice(0, 2000) });
            return answer(400, { error: { code: 400, message: `invalid JSON body: ${e.message}`, type: "invalid_request_error" } });
        }
        dump("request", body);
        const abort = new AbortController();
        res.on("close", () => { if (!res.writableFinished) abort.abort(); });
        oneAtATime(() => {
            if (abort.signal.aborted) throw Object.assign(new Error("the client went away"), { aborted: true });
            return complete(body, abort.signal);
        }).then((reply) => answer(200, reply), (e) => {
            if (abort.signal.aborted || e.aborted) { dump("answer", { aborted: true }); return log(`#${n} aborted`); }
            log(`#${n} error ${e.status ?? 500}: ${e.message}`);
            answer(e.status ?? 500, { error: { code: e.status ?? 500, message: e.message, type: e.type ?? "server_error", ...(e.extra ?? {}) } });
        });
    });
});
// POST /v1/responses: the one answer item, streamed as server-sent events. Whatever fails once
// the 200 header is out (a body that is no Responses request, a reply of an unexpected shape,
// the model) ends the stream with `response.failed`, never the process.
function responses(req, res) {
    const n = ++requests;
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
        const dump = (name, obj) => opts.dumpDir && fs.writeFileSync(`${opts.dumpDir}/${n}-${name}.json`, JSON.stringify(obj, null, 1));
        const refuse = (status, message, type) => {
            log(`#${n} responses refused ${status}: ${message}`);
            const text = JSON.stringify({ error: { code: status, message, type } });
            res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
            res.end(text);
        };
        let body;
        try { body = JSON.parse(Buffer.concat(chunks).toString("utf8")); } catch (e) {
            return refuse(400, `invalid JSON body: ${e.message}`, "invalid_request_error");
        }
        if (body === null || typeof body !== "object" || Array.isArray(body))
            return refuse(400, "the body is not a JSON object", "invalid_request_error");
        try { dump("request", body); } catch (e) { return refuse(500, `cannot dump the request: ${e.message}`, "server_error"); }
        const rid = `resp_${n}`;
        const event = (type, data) => { if (!res.writableEnded && !res.destroyed) res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`); };
        const failed = (e) => {
            log(`#${n} responses error ${e?.status ?? 500}: ${e?.message ?? e}`);
            try { dump("answer", { error: String(e?.message ?? e), status: e?.status ?? 500 }); } catch { /* the answer matters more than its dump */ }
            event("response.failed", { response: { id: rid, status: "failed",
                error: { code: e?.type ?? "server_error", message: String(e?.message ?? e) } } });
            if (!res.writableEnded) res.end();
        };
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "close" });
        event("response.created", { response: { id: rid, status: "in_progress" } });
        const abort = new AbortController();
        res.on("close", () => { if (!res.writableFinished) abort.abort(); });
        let chat, namespaces;
        try { ({ chat, namespaces } = responsesToChat(body)); } catch (e) { return failed(e); }
        const started = Date.now();
        oneAtATime(() => {
            if (abort.signal.aborted) throw Object.assign(new Error("the client went away"), { aborted: true });
            return complete({ ...chat, tools: chat.tools.length ? chat.tools : undefined }, abort.signal);
        }).then((reply) => { try {
            const message = reply.choices[0].message;
            const call = message.tool_calls?.[0];
            const item = call ? { type: "function_call", id: `fc_${n}`, call_id: call.id, name: call.function.name,
                arguments: call.function.arguments, ...(namespaces.get(call.function.name) ? { namespace: namespaces.get(call.function.name) } : {}) }
                : { type: "message", id: `msg_${n}`, role: "assistant", status: "completed",
                    content: [{ type: "output_text", text: message.content ?? "", annotations: [] }] };
            dump("answer", { item, usage: reply.usage, ms: Date.now() - started });
            event("response.output_item.added", { output_index: 0, item });
            event("response.output_item.done", { output_index: 0, item });
            const usage = { input_tokens: reply.usage.prompt_tokens, input_tokens_details: { cached_tokens: 0 },
                output_tokens: reply.usage.completion_tokens, output_tokens_details: { reasoning_tokens: 0 },
                total_tokens: reply.usage.prompt_tokens + reply.usage.completion_tokens };
            event("response.completed", { response: { id: rid, status: "completed", usage } });
            log(`#${n} responses: ${call ? `call ${call.function.name}` : "message"} in ${Date.now() - started} ms`);
            res.end();
        } catch (e) { failed(e); } }, (e) => {
            if (abort.signal.aborted || e?.aborted) { dump("answer", { aborted: true }); return log(`#${n} aborted`); }
            failed(e);
        }).catch((e) => log(`#${n} responses: cannot end the stream: ${e?.message ?? e}`));
    });
}

server.requestTimeout = 0;
server.listen(opts.port, "127.0.0.1", () => {
    console.log(`listening on http://127.0.0.1:${server.address().port}`);
    log(`model ${opts.model}, ctx ${context.contextSize}, threads ${opts.threads}`);
});
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(0));
