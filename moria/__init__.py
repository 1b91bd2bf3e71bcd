"""Moria: measure how language and vision-language models play games.

This package is shared by every service: the generated gRPC stubs (``moria.common.v1``,
``moria.env.v1``, ``moria.policy.v1``, ``moria.orchestrator.v1``) and a small hand-written SDK
(``moria.codecs``, ``moria.server``, ``moria.clients``, ``moria.config``).

Importing it applies Moria's gRPC core settings (``moria.grpc_defaults``) before anything
imports ``grpc``.
"""

from moria import grpc_defaults as _grpc_defaults

_grpc_defaults.apply()

__version__ = "0.1.0"

#: The contract version every result records.
API_VERSION = "moria.v1"
