#!/usr/bin/env node
'use strict';
// One episode on an Env server (moria.env.v1.EnvService.Session): open a task with a seed, step
// with actions chosen by a seeded random player (or a fixed list, cycled) until the episode
// ends or the step cap, print every step, the returns and the episode end, then close.

const {
  CliError, Lockstep, connect, fromStruct, loadServices, main, parseCommandLine, positive,
  seededRandom, uint64, unary,
} = require('./lib');

const USAGE = `usage: node env_episode.js [options]
  --address ADDR     env server, host:port or unix:///path.sock (default 127.0.0.1:50051)
  --task TASK        "<family>:<task>" (default babyai:BabyAI-MixedTrainLocal-v0/goto)
  --seed N           episode seed, unsigned 64-bit (default 1)
  --max-steps N      step cap: sent as OpenRequest.max_steps and bounds the loop (default 20)
  --actions LIST     comma-separated action names to play in turn instead of random ones
  --connect-timeout S  seconds to wait for the server (default 5)
  --timeout S        give up after S seconds in all (default 60)
`;

const args = parseCommandLine({
  address: { type: 'string', default: '127.0.0.1:50051' },
  task: { type: 'string', default: 'babyai:BabyAI-MixedTrainLocal-v0/goto' },
  seed: { type: 'string', default: '1' },
  'max-steps': { type: 'string', default: '20' },
  actions: { type: 'string' },
  'connect-timeout': { type: 'string', default: '5' },
  timeout: { type: 'string', default: '60' },
}, USAGE);

function firstLine(text) {
  return (text || '').split('\n').find((line) => line.trim()) || '';
}

// The action names an agent may play now: the step's legal actions, else its action space.
function choices(space, observation) {
  if (observation && observation.legal_actions && observation.legal_actions.length) {
    return observation.legal_actions;
  }
  return space.actions.map((a) => a.name);
}

async function run() {
  const seed = uint64(args, 'seed');
  const maxSteps = positive(args, 'max-steps', { integer: true });
  const script = args.actions ? args.actions.split(',').map((a) => a.trim()).filter(Boolean) : null;
  const services = loadServices();
  const client = await connect(services.env, args.address, 'env server',
    positive(args, 'connect-timeout'));
  try {
    const info = await unary(client, 'GetInfo', {}, 10);
    console.log(`server api=${info.version.api_version} families=${info.families.join(',')}`);

    const deadline = Date.now() + positive(args, 'timeout') * 1000;
    const session = new Lockstep(client.Session({ deadline }), 'Session');
    const opened = (await session.request({
      open: { task: args.task, seed, max_steps: String(maxSteps) },
    })).opened;
    const agentIds = Object.keys(opened.agents).sort();
    console.log(`opened session=${opened.session_id} task=${opened.family}:${opened.task} ` +
      `seed=${seed} max_steps=${opened.max_steps} agents=${agentIds.join(',')} ` +
      `idle_timeout_s=${opened.idle_timeout_s}`);
    const spaces = {};
    const observations = {};
    for (const id of agentIds) {
      const start = opened.agents[id];
      spaces[id] = start.action_space;
      observations[id] = start.observation;
      console.log(`instruction[${id}]: ${firstLine(start.instruction)}`);
      console.log(`actions[${id}]: ${start.action_space.actions.map((a) => a.name).join(', ')} ` +
        `(default: ${start.action_space.default_action})`);
    }

    const random = seededRandom(seed);
    const returns = {};
    let next = opened.next_agents;
    let end = null;
    let steps = 0;
    while (next.length && !end && steps < maxSteps) {
      const actions = {};
      for (const id of next) {
        const names = choices(spaces[id], observations[id]);
        let name;
        if (script) name = script[steps % script.length];
        else if (names.length) name = names[Math.floor(random() * names.length)];
        else name = spaces[id].default_action || 'look'; // free-text games
        actions[id] = { text: name };
      }
      const step = (await session.request({ step: { actions } })).step;
      if (step.error && step.error.code) {
        throw new CliError(`step refused: code ${step.error.code}: ${step.error.message}`);
      }
      steps = Number(step.step);
      for (const [id, result] of Object.entries(step.agents)) {
        observations[id] = result.observation;
        returns[id] = (returns[id] || 0) + result.reward;
        const applied = result.action_result.applied_action;
        const sent = actions[id] ? JSON.stringify(actions[id].text) : '(waiting)';
        console.log(`step ${step.step}: ${id} -> ${sent} valid=${result.action_result.valid} ` +
          `applied=${JSON.stringify(applied ? applied.text : '')} reward=${result.reward} ` +
          `terminated=${result.terminated} truncated=${result.truncated} ` +
          `progression=${step.progression}`);
      }
      next = step.next_agents;
      end = step.episode_end;
    }
    if (!end) {
      console.log(`stopped: step cap ${maxSteps} reached before the episode ended`);
    }
    const closed = (await session.request({ close: {} })).closed;
    end = end || closed.episode_end;
    session.end();
    if (end) {
      console.log(`episode_end: reason=${end.reason} steps=${end.num_steps} ` +
        `returns=${JSON.stringify(end.returns)} progression=${end.progression} ` +
        `metrics=${JSON.stringify(fromStruct(end.metrics))}`);
    }
    console.log(`client returns=${JSON.stringify(returns)}`);
    console.log('closed');
  } finally {
    client.close();
  }
}

main(run, args.timeout);
