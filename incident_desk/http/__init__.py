"""Streamable HTTP mode, the shared desk: ``serve`` builds the ASGI app and runs uvicorn; around the SDK's app sit
``peers`` (who a peer is), ``limits`` (what one peer can hold), ``sessions`` (stateful sessions per client),
``replica`` (session ids routed back to their replica) and the identity layers (``oauth``, ``oauth_bearer``).

Empty on purpose: importing one of these modules loads no other.
"""
