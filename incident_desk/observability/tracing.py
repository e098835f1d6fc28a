"""OpenTelemetry traces exported over OTLP/HTTP, when ``otlp_endpoint`` is set and the ``[otel]`` extra is installed.

The SDK already wraps every request in a server span that continues a W3C ``traceparent`` from the request's
``_meta``; without a tracer provider those spans cost next to nothing and go nowhere. This module gives them one.
Imported only when the operator sets ``otlp_endpoint``.
"""

from __future__ import annotations

from collections.abc import Callable

from incident_desk import __version__

SERVICE_NAME = "incident-desk"
MISSING_EXTRA = (
    "otlp_endpoint is set but OpenTelemetry's SDK and OTLP exporter are not installed: "
    "install incident-desk[otel] (opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http)"
)


def start_tracing(endpoint: str) -> Callable[[], None]:
    """Install a tracer provider exporting to ``endpoint``; the function that flushes and stops it.

    Raises ``RuntimeError`` naming the missing extra when it is not installed.
    """
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise RuntimeError(MISSING_EXTRA) from exc
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME, "service.version": __version__}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    return provider.shutdown
