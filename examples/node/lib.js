'use strict';
// Shared helpers of the Node examples: load Moria's contract from the repository's protos/
// directory at run time (no generated code), make clients, drive a bidirectional stream in
// lockstep, convert plain JS objects to and from google.protobuf.Struct, and turn failures into
// one-line messages with a non-zero exit status.

const path = require('node:path');
const fs = require('node:fs');
const { parseArgs } = require('node:util');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// protos/ at the repository root (MORIA_PROTOS overrides it, e.g. for a copy of the contract).
const PROTOS_DIR = process.env.MORIA_PROTOS || path.resolve(__dirname, '..', '..', 'protos');

const PROTO_FILES = [
  'moria/env/v1/env_service.proto',
  'moria/policy/v1/policy_service.proto',
  'moria/orchestrator/v1/orchestrator_service.proto',
];

// Output piped into a reader that stops early (`| head`): stop quietly, as other tools do.
process.stdout.on('error', (err) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

// Thrown for a problem the user can fix; main() prints its message alone and exits 1.
class CliError extends Error {}

// The loaded services: { env, policy, orchestrator } (each a client constructor).
function loadServices() {
  for (const file of PROTO_FILES) {
    if (!fs.existsSync(path.join(PROTOS_DIR, file))) {
      throw new CliError(`cannot find ${file} under ${PROTOS_DIR} (set MORIA_PROTOS to the ` +
        'protos/ directory of a Moria checkout)');
    }
  }
  // google/protobuf/struct.proto, the only import outside protos/, ships with proto-loader.
  const definition = protoLoader.loadSync(PROTO_FILES, {
    includeDirs: [PROTOS_DIR],
    keepCase: true, // field names exactly as in the .proto files (snake_case)
    longs: String, // 64-bit integers (seeds, counts) as decimal strings: no precision lost
    enums: String, // enum values by name, e.g. "END_REASON_TERMINATED"
    defaults: true, // unset scalar fields read as their default (0, "", false)
    oneofs: true, // each oneof also names its set member, e.g. response: "opened"
  });
  const moria = grpc.loadPackageDefinition(definition).moria;
  return {
    env: moria.env.v1.EnvService,
    policy: moria.policy.v1.PolicyService,
    orchestrator: moria.orchestrator.v1.OrchestratorService,
  };
}

// Client options: Moria's servers accept messages up to 64 MiB (frames, tensors).
const CHANNEL_OPTIONS = {
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
  'grpc.max_send_message_length': 64 * 1024 * 1024,
};

// A plaintext client of `Service` at `address` (host:port or unix:///path.sock), once the
// channel is connected; a CliError naming the address when it does not connect in time.
async function connect(Service, address, what, timeoutS) {
  const client = new Service(address, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
  await new Promise((resolve, reject) => {
    client.waitForReady(Date.now() + timeoutS * 1000, (err) => {
      if (!err) return resolve();
      client.close();
      reject(new CliError(`cannot reach the ${what} at ${address} within ${timeoutS} s ` +
        `(is it running? ${err.message})`));
    });
  });
  return client;
}

// One-line text of a gRPC error: "<CODE>: <details>" (a multi-line message joined with "; ").
function rpcErrorText(err) {
  let text = String(err && err.message ? err.message : err);
  if (err && typeof err.code === 'number') {
    const name = Object.keys(grpc.status).find((k) => grpc.status[k] === err.code) || err.code;
    text = `${name}: ${err.details || err.message}`;
  }
  return text.split(/\s*\n\s*/).filter(Boolean).join('; ').replace(/:;/g, ':');
}

// A unary call as a promise, with a deadline.
function unary(client, method, request, timeoutS) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + timeoutS * 1000 }, (err, response) => {
      if (err) reject(new CliError(`${method} failed: ${rpcErrorText(err)}`));
      else resolve(response);
    });
  });
}

// A bidirectional stream where every request is answered by exactly one response, in order
// (EnvService.Session, PolicyService.Play). `request(message)` resolves with the answer, or
// rejects when the server ends the stream (with its status) before answering.
class Lockstep {
  constructor(call, what) {
    this.call = call;
    this.what = what;
    this.waiting = [];
    this.failure = null;
    call.on('data', (message) => {
      const next = this.waiting.shift();
      if (next) next.resolve(message);
    });
    call.on('error', (err) => this.fail(new CliError(`${what} failed: ${rpcErrorText(err)}`)));
    call.on('end', () => this.fail(new CliError(`${what} ended by the server without an answer`)));
  }

  fail(error) {
    if (!this.failure) this.failure = error;
    for (const next of this.waiting.splice(0)) next.reject(this.failure);
  }

  request(message) {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.call.write(message);
    });
  }

  // Half-close the stream: the server then ends the call.
  end() {
    this.call.end();
  }
}

// google.protobuf.Struct <-> plain objects. proto-loader leaves Struct as its wire shape
// ({fields: {key: {stringValue: ...}}}), so JSON-like values are converted here.
function toValue(value) {
  if (value === null || value === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof value === 'number') return { numberValue: value };
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  if (typeof value === 'object') return { structValue: toStruct(value) };
  throw new TypeError(`cannot put a ${typeof value} into a Struct`);
}

function toStruct(object) {
  const fields = {};
  for (const [key, value] of Object.entries(object)) fields[key] = toValue(value);
  return { fields };
}

function fromValue(value) {
  if (!value) return null;
  switch (value.kind) {
    case 'numberValue': return value.numberValue;
    case 'stringValue': return value.stringValue;
    case 'boolValue': return value.boolValue;
    case 'structValue': return fromStruct(value.structValue);
    case 'listValue': return (value.listValue.values || []).map(fromValue);
    default: return null;
  }
}

function fromStruct(struct) {
  const object = {};
  for (const [key, value] of Object.entries((struct && struct.fields) || {})) {
    object[key] = fromValue(value);
  }
  return object;
}

// A small seeded generator (mulberry32), so a seed gives the same action sequence.
function seededRandom(seed) {
  let state = Number(BigInt.asUintN(32, BigInt(seed))) || 1;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Parse the command line with node:util's parseArgs; `--help` prints `usage` and exits 0, a
// bad flag prints the problem and the usage and exits 2.
function parseCommandLine(options, usage) {
  let parsed;
  try {
    parsed = parseArgs({ options: { ...options, help: { type: 'boolean', short: 'h' } } });
  } catch (err) {
    process.stderr.write(`error: ${err.message}\n${usage}`);
    process.exit(2);
  }
  if (parsed.values.help) {
    process.stdout.write(usage);
    process.exit(0);
  }
  return parsed.values;
}

// A positive number from a flag value, or a CliError naming the flag.
function positive(values, name, { integer = false } = {}) {
  const number = Number(values[name]);
  if (!Number.isFinite(number) || number <= 0 || (integer && !Number.isInteger(number))) {
    throw new CliError(`--${name} must be a positive ${integer ? 'integer' : 'number'}, ` +
      `got ${JSON.stringify(values[name])}`);
  }
  return number;
}

// A decimal uint64 (seeds travel as strings: JS numbers hold 53 bits only).
function uint64(values, name) {
  const text = String(values[name]);
  if (!/^\d+$/.test(text) || BigInt(text) >= 2n ** 64n) {
    throw new CliError(`--${name} must be an unsigned 64-bit integer, got ${JSON.stringify(text)}`);
  }
  return text;
}

// Exit with `code` once stdout and stderr are flushed (they may be pipes).
function exitAfterFlush(code) {
  process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
}

// Run `body` and exit: 0 when it returns (or the exit code it returns), 1 with a one-line
// message on a CliError or an unexpected error, and 1 when `deadlineS` seconds pass first (the
// whole program's bound, whatever it waits on).
function main(body, deadlineS) {
  const deadline = Number(deadlineS);
  if (!Number.isFinite(deadline) || deadline <= 0) {
    process.stderr.write(`error: --timeout must be a positive number, got ${JSON.stringify(deadlineS)}\n`);
    process.exit(2);
  }
  const timer = setTimeout(() => {
    process.stderr.write(`error: gave up after ${deadline} s (--timeout)\n`);
    exitAfterFlush(1);
  }, deadline * 1000);
  Promise.resolve()
    .then(body)
    .then((code) => {
      clearTimeout(timer);
      exitAfterFlush(typeof code === 'number' ? code : 0);
    })
    .catch((err) => {
      clearTimeout(timer);
      const text = err instanceof CliError ? err.message : `unexpected error: ${err && err.stack}`;
      process.stderr.write(`error: ${text}\n`);
      exitAfterFlush(1);
    });
}

module.exports = {
  CliError,
  Lockstep,
  PROTOS_DIR,
  connect,
  fromStruct,
  loadServices,
  main,
  parseCommandLine,
  positive,
  rpcErrorText,
  seededRandom,
  toStruct,
  uint64,
  unary,
};
