#!/usr/bin/env node
'use strict';
// A run on the orchestrator service (moria.orchestrator.v1.OrchestratorService): SubmitRun with
// a small run spec (a few BabyAI episodes played by a model-free player), then StreamEvents
// until the run's final event, printing each event; exit 0 when the run completed, 1 otherwise.

const {
  CliError, connect, fromStruct, loadServices, main, parseCommandLine, positive, rpcErrorText,
  toStruct, unary,
} = require('./lib');

const USAGE = `usage: node orchestrator_run.js [options]
  --address ADDR     orchestrator service, host:port or unix:///path.sock (default 127.0.0.1:50070)
  --env ADDR         env server hosting babyai for the run (endpoints.env.babyai); without
                     --env and --policy the orchestrator starts its own servers
  --policy ADDR      policy server for the run (endpoints.policy)
  --task TASK        BabyAI task (default BabyAI-MixedTrainLocal-v0/goto)
  --episodes N       episodes to play (default 3)
  --max-steps N      step cap per episode (default 20)
  --agent-type TYPE  agent.type (default random; oracle plays the BabyAI bot)
  --run-id ID        run id (default: the server picks one)
  --connect-timeout S  seconds to wait for the service (default 5)
  --timeout S        give up after S seconds in all (default 300)
`;

const args = parseCommandLine({
  address: { type: 'string', default: '127.0.0.1:50070' },
  env: { type: 'string' },
  policy: { type: 'string' },
  task: { type: 'string', default: 'BabyAI-MixedTrainLocal-v0/goto' },
  episodes: { type: 'string', default: '3' },
  'max-steps': { type: 'string', default: '20' },
  'agent-type': { type: 'string', default: 'random' },
  'run-id': { type: 'string', default: '' },
  'connect-timeout': { type: 'string', default: '5' },
  timeout: { type: 'string', default: '300' },
}, USAGE);

// The events after which the service ends the stream.
const FINAL = new Set(['completed', 'failed', 'cancelled']);

// The run spec, as the keys of a `moria eval` YAML file.
function runSpec() {
  const spec = {
    agent: { type: args['agent-type'] },
    envs: { names: 'babyai' },
    tasks: { babyai_tasks: [args.task] },
    eval: {
      num_episodes: { babyai: positive(args, 'episodes', { integer: true }) },
      max_steps_per_episode: positive(args, 'max-steps', { integer: true }),
      num_workers: 1,
    },
  };
  if (Boolean(args.env) !== Boolean(args.policy)) {
    throw new CliError('give both --env and --policy, or neither');
  }
  if (args.env) spec.endpoints = { env: { babyai: [args.env] }, policy: [args.policy] };
  return spec;
}

// One line per event: sequence, type and the payload's most telling keys.
function describe(event) {
  const p = fromStruct(event.payload);
  const keys = ['env', 'task', 'episode_index', 'end_reason', 'num_steps', 'progression',
    'episodes_done', 'episodes_total', 'average_progress', 'error'];
  const shown = keys.filter((k) => p[k] !== undefined && p[k] !== null && p[k] !== '')
    .map((k) => `${k}=${typeof p[k] === 'string' ? JSON.stringify(p[k]) : p[k]}`);
  return `event ${event.sequence} ${event.type}${shown.length ? ' ' + shown.join(' ') : ''}`;
}

// StreamEvents from the first event until the final event; resolves with that event.
function follow(client, runId, deadline) {
  return new Promise((resolve, reject) => {
    let final = null;
    const call = client.StreamEvents({ run_id: runId, from_sequence: '1' }, { deadline });
    call.on('data', (response) => {
      const event = response.event;
      console.log(describe(event));
      if (FINAL.has(event.type)) final = event;
    });
    call.on('error', (err) => reject(new CliError(`StreamEvents failed: ${rpcErrorText(err)}`)));
    call.on('end', () => {
      if (final) resolve(final);
      else reject(new CliError('the event stream ended before the run finished'));
    });
  });
}

async function run() {
  const spec = runSpec();
  const deadline = Date.now() + positive(args, 'timeout') * 1000;
  const services = loadServices();
  const client = await connect(services.orchestrator, args.address, 'orchestrator service',
    positive(args, 'connect-timeout'));
  try {
    const submitted = await unary(client, 'SubmitRun',
      { spec: toStruct(spec), run_id: args['run-id'] }, 30);
    console.log(`submitted run=${submitted.run_id} created=${submitted.created} ` +
      `state=${submitted.run.state} episodes_total=${submitted.run.episodes_total}`);
    const final = await follow(client, submitted.run_id, deadline);
    const run = (await unary(client, 'GetRun', { run_id: submitted.run_id }, 30)).run;
    const summary = fromStruct(run.summary);
    const progress = summary.average_progress === undefined ? '' :
      ` average_progress=${summary.average_progress}`;
    console.log(`finished run=${run.run_id} state=${run.state} ` +
      `episodes=${run.episodes_done}/${run.episodes_total}${progress} output_dir=${run.output_dir}`);
    if (run.error) console.log(`run error: ${JSON.stringify(run.error)}`);
    return final.type === 'completed' ? 0 : 1;
  } finally {
    client.close();
  }
}

main(run, args.timeout);
