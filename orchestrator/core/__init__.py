"""Playing a run: the runner, its event stream, one episode, replicas and the local stack."""
