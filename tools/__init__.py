"""Tools that sit above the services: offline work that may use a service's code in-process
(training a policy on a game, say), never imported by the services themselves
(``.importlinter``)."""
