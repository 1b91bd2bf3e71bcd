"""EnvService: game families behind gRPC (``python -m env_server serve --families babyai``)."""

import moria  # noqa: F401  (first: applies moria.grpc_defaults before grpc is imported)
