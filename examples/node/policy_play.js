#!/usr/bin/env node
'use strict';
// One agent's episode on a Policy server (moria.policy.v1.PolicyService.Play): Begin with an
// agent config, then Observe -> Act for a few turns, then End.
//
// Without --env the turns use a built-in BabyAI-style action space and observation text. With
// --env ADDRESS the instruction, action space and observations come from a real env session,
// and each Act is stepped there (a minimal version of what Moria's orchestrator does).

const {
  CliError, Lockstep, connect, loadServices, main, parseCommandLine, positive, uint64, unary,
} = require('./lib');

const USAGE = `usage: node policy_play.js [options]
  --address ADDR     policy server, host:port or unix:///path.sock (default 127.0.0.1:50061)
  --agent-type TYPE  agent.type of the player (default random: a seeded random legal action,
                     no model needed; any strategy the server lists works)
  --seed N           Begin.seed, unsigned 64-bit (default 1)
  --turns N          Observe/Act turns at most (default 3)
  --env ADDR         take the observations from this env server and step the Acts there
  --task TASK        with --env: the task (default babyai:BabyAI-MixedTrainLocal-v0/goto)
  --connect-timeout S  seconds to wait for each server (default 5)
  --timeout S        give up after S seconds in all (default 60)
`;

const args = parseCommandLine({
  address: { type: 'string', default: '127.0.0.1:50061' },
  'agent-type': { type: 'string', default: 'random' },
  seed: { type: 'string', default: '1' },
  turns: { type: 'string', default: '3' },
  env: { type: 'string' },
  task: { type: 'string', default: 'babyai:BabyAI-MixedTrainLocal-v0/goto' },
  'connect-timeout': { type: 'string', default: '5' },
  timeout: { type: 'string', default: '60' },
}, USAGE);

// The built-in turn: BabyAI's six actions and a made-up observation, so that no env is needed.
const BUILT_IN = {
  agentId: 'agent_0',
  task: 'BabyAI-MixedTrainLocal-v0/goto',
  instruction: 'You are playing BabyAI. Your goal: go to the red ball. Answer with one action.',
  actionSpace: {
    actions: [
      { name: 'turn left', description: 'turn 90 degrees to your left' },
      { name: 'turn right', description: 'turn 90 degrees to your right' },
      { name: 'go forward', description: 'move one square ahead' },
      { name: 'pick up', description: 'pick up the object in front of you' },
      { name: 'drop', description: 'drop what you carry in front of you' },
      { name: 'toggle', description: 'open or close the door in front of you' },
    ],
    default_action: 'go forward',
    free_text: false,
  },
  observation(step) {
    const text = `a red ball ${3 - (step % 3)} steps forward`;
    return {
      long_term_context: text,
      short_term_context: '',
      text: { long_term_context: text, short_term_context: '' },
      step: String(step),
    };
  },
};

async function run() {
  const seed = uint64(args, 'seed');
  const turns = positive(args, 'turns', { integer: true });
  const connectTimeout = positive(args, 'connect-timeout');
  const deadline = Date.now() + positive(args, 'timeout') * 1000;
  const services = loadServices();
  const policy = await connect(services.policy, args.address, 'policy server', connectTimeout);
  let envClient = null;
  try {
    const info = await unary(policy, 'GetInfo', {}, 10);
    console.log(`server api=${info.version.api_version} strategies=${info.strategies.join(',')}`);

    // Where the turns come from: a real env session or the built-in one.
    let session = null;
    let agentId = BUILT_IN.agentId;
    let start = {
      instruction: BUILT_IN.instruction,
      action_space: BUILT_IN.actionSpace,
      observation: BUILT_IN.observation(0),
    };
    let envName = 'babyai';
    let task = BUILT_IN.task;
    if (args.env) {
      envClient = await connect(services.env, args.env, 'env server', connectTimeout);
      session = new Lockstep(envClient.Session({ deadline }), 'Session');
      const opened = (await session.request({
        // the oracle player reads the expert's next action, which the env adds when asked
        open: { task: args.task, seed, max_steps: String(turns), oracle: args['agent-type'] === 'oracle' },
      })).opened;
      agentId = Object.keys(opened.agents).sort()[0];
      start = opened.agents[agentId];
      envName = opened.family;
      task = opened.task;
      console.log(`env opened session=${opened.session_id} task=${envName}:${task} agent=${agentId}`);
    }
    const names = start.action_space.actions.map((a) => a.name);

    const play = new Lockstep(policy.Play({ deadline }), 'Play');
    // Only the fields set here are sent; the server's defaults apply to the rest
    // (AgentSettings / ClientSettings in policy_service.proto).
    const ready = (await play.request({
      begin: {
        episode_id: `node-example-${seed}`,
        agent_id: agentId,
        instruction: start.instruction,
        action_space: start.action_space,
        seed,
        env_name: envName,
        task,
        observation: start.observation,
        agent: { type: args['agent-type'] },
      },
    })).ready;
    console.log(`ready strategy=${ready.strategy} model=${ready.model || '(none)'} ` +
      `idle_timeout_s=${ready.idle_timeout_s}`);

    let observation = start.observation;
    let lastResult = null;
    let episodeEnd = null;
    let played = 0;
    for (let step = 0; step < turns && !episodeEnd; step += 1) {
      const act = (await play.request({
        observe: {
          observation,
          last_action_result: lastResult,
          step: String(step),
        },
      })).act;
      if (act.error && act.error.code) {
        throw new CliError(`the player could not act: code ${act.error.code}: ${act.error.message}`);
      }
      const action = act.action[act.action.kind];
      const known = names.length === 0 || names.includes(action);
      console.log(`act step=${step}: ${JSON.stringify(action)} in_action_space=${known} ` +
        `reasoning=${JSON.stringify(act.reasoning)} latency_s=${act.latency_s.toFixed(4)}`);
      played += 1;
      if (session) {
        const result = (await session.request({ step: { actions: { [agentId]: act.action } } })).step;
        const mine = result.agents[agentId];
        observation = mine.observation;
        lastResult = mine.action_result;
        episodeEnd = result.episode_end;
        console.log(`env step ${result.step}: valid=${mine.action_result.valid} ` +
          `reward=${mine.reward} progression=${result.progression}`);
      } else {
        observation = BUILT_IN.observation(step + 1);
        lastResult = { valid: true, applied_action: act.action, feedback: '' };
      }
    }
    if (session) {
      const closed = (await session.request({ close: {} })).closed;
      episodeEnd = episodeEnd || closed.episode_end;
      session.end();
    }
    if (!episodeEnd) {
      episodeEnd = { reason: 'END_REASON_TRUNCATED', num_steps: String(played), returns: {} };
    }
    const ended = (await play.request({ end: { episode_end: episodeEnd } })).ended;
    play.end();
    console.log(`ended turns=${played} reason=${episodeEnd.reason} ` +
      `total_usage=${JSON.stringify(ended.total_usage)}`);
  } finally {
    policy.close();
    if (envClient) envClient.close();
  }
}

main(run, args.timeout);
