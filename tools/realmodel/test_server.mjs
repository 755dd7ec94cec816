// server.mjs's own failure paths, without a model: node-llama-cpp is replaced by a stub (a
// module resolve hook), and the server is asked what a careless or hostile client sends. The
// process must answer each (an HTTP error before the stream, `response.failed` within it) and
// stay up; a plain request still gets its answer.
//
//   node tools/realmodel/test_server.mjs      (tools/realmodel/test.sh runs it first)
//
// Exits 0 when every check passes, 1 with the failed checks on stderr.

import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "realmodel-server-test-"));
const dumpDir = path.join(tmp, "dump");

// The stub: a model whose every answer is "stub answer"; a request naming REMOVE_DUMP_DIR
// removes the dump directory while it is answered, so that writing the answer's dump fails
// inside the success handler.
fs.writeFileSync(path.join(tmp, "node-llama-cpp.mjs"), `
import fs from "node:fs";
export async function getLlama() {
    return {
        loadModel: async () => ({ tokenizer: {},
            createContext: async ({ contextSize }) => ({ contextSize, getSequence: () => ({}) }) }),
        createGrammarForJsonSchema: async () => ({}),
    };
}
export class LlamaChat {
    constructor() {
        this.chatWrapper = { generateContextState: () => ({ contextText: { tokenize: () => [1, 2, 3] } }) };
    }
    async generateResponse(history, options) {
        if (JSON.stringify(history).includes("REMOVE_DUMP_DIR"))
            fs.rmSync(process.env.STUB_DUMP_DIR, { recursive: true, force: true });
        options.onToken?.([1]);
        return { response: "stub answer", metadata: { stopReason: "eogToken" } };
    }
}
`);
fs.writeFileSync(path.join(tmp, "hooks.mjs"), `
export async function resolve(specifier, context, next) {
    if (specifier === "node-llama-cpp")
        return { url: new URL("./node-llama-cpp.mjs", import.meta.url).href, shortCircuit: true };
    return next(specifier, context);
}
`);
fs.writeFileSync(path.join(tmp, "register.mjs"),
    `import { register } from "node:module";\nregister("./hooks.mjs", import.meta.url);\n`);

const server = spawn(process.execPath, ["--import", path.join(tmp, "register.mjs"), path.join(here, "server.mjs"),
    "--model", "stub.gguf", "--dump-dir", dumpDir], { env: { ...process.env, STUB_DUMP_DIR: dumpDir },
    stdio: ["ignore", "pipe", "pipe"] });
let stderr = "";
server.stderr.on("data", (d) => { stderr += d; });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };
const deadline = setTimeout(() => { failures.push("the checks took more than 60 s"); finish(); }, 60_000);

function finish() {
    clearTimeout(deadline);
    const alive = server.exitCode === null && server.signalCode === null;
    check(alive, `the server died (exit ${server.exitCode}, signal ${server.signalCode})`);
    server.kill();
    fs.rmSync(tmp, { recursive: true, force: true });
    if (failures.length) {
        for (const f of failures) console.error(`FAIL realmodel server: ${f}`);
        console.error(`server's log:\n${stderr}`);
        process.exit(1);
    }
    console.log("realmodel server: every failure path answered, the server stayed up");
    process.exit(0);
}

const port = await new Promise((resolve, reject) => {
    let out = "";
    server.stdout.on("data", (d) => {
        out += d;
        const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
        if (m) resolve(Number(m[1]));
    });
    server.on("exit", (code) => reject(new Error(`the server exited (${code}) before listening:\n${stderr}`)));
});

const post = async (body) => {
    const r = await fetch(`http://127.0.0.1:${port}/v1/responses`, { method: "POST", body,
        headers: { "content-type": "application/json" } });
    return { status: r.status, text: await r.text() };
};
const request = (text) => JSON.stringify({ input: [{ type: "message", role: "user", content: text }] });

try {
    for (const body of ["null", "[1]", "7", "{"]) {
        const r = await post(body);
        check(r.status === 400 && JSON.parse(r.text).error?.type === "invalid_request_error",
            `body ${body}: ${r.status} ${r.text}`);
    }
    // No Responses request (its tools not a list): the conversion fails after the 200 header.
    const bad = await post(JSON.stringify({ tools: 5, input: [] }));
    check(bad.status === 200 && bad.text.includes("event: response.failed") && !bad.text.includes("response.completed"),
        `tools: 5: ${bad.status} ${bad.text}`);
    // The success handler fails (the answer's dump cannot be written).
    const broken = await post(request("REMOVE_DUMP_DIR"));
    check(broken.text.includes("event: response.failed") && !broken.text.includes("response.completed"),
        `a failing success handler: ${broken.text}`);
    fs.mkdirSync(dumpDir, { recursive: true });
    const plain = await post(request("hello"));
    check(plain.text.includes("event: response.completed") && plain.text.includes("stub answer"),
        `a plain request: ${plain.text}`);
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    check(health.status === 200, `GET /health: ${health.status}`);
} catch (e) {
    failures.push(`a request failed: ${e?.stack ?? e}`);
}
finish();
