"""Prompting protocols: how an LLM player turns observations into model requests and answers.

``moria`` is Moria's own (``agent_server.strategies``); ``balrog`` runs BALROG's own agent code
from a checkout (``agent_server.protocols.balrog``).
"""
