"""PolicyService: model backends and prompting strategies behind gRPC."""

import moria  # noqa: F401  (first: applies moria.grpc_defaults before grpc is imported)
