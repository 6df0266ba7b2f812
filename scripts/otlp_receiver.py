"""A small OpenTelemetry receiver for tests and the benchmark: OTLP/HTTP with protobuf.

Accepts POST /v1/traces (application/x-protobuf), decodes ExportTraceServiceRequest with the
opentelemetry-proto package, and appends one JSON object per span to the output file:
trace_id, span_id, parent_span_id (hex), name, kind, service, start/end in nanoseconds, status,
attributes (flattened to strings, numbers and booleans) and links. Prints "listening on PORT"
once it accepts connections. Run it through scripts/otlp-receiver, which installs the package.
"""

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

LOCK = threading.Lock()


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in any_value.kvlist_value.values}
    if kind == "bytes_value":
        return any_value.bytes_value.hex()
    return getattr(any_value, kind)


def spans(request):
    for resource_spans in request.resource_spans:
        resource = {kv.key: value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": span.kind,
                    "service": resource.get("service.name"),
                    "start_ns": span.start_time_unix_nano,
                    "end_ns": span.end_time_unix_nano,
                    "status": span.status.code,
                    "attributes": {kv.key: value(kv.value) for kv in span.attributes},
                    "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()} for l in span.links],
                }


def handler(output):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/traces":
                return self.answer(404, b"")
            request = ExportTraceServiceRequest()
            try:
                request.ParseFromString(body)
            except Exception:  # noqa: BLE001 - any undecodable body is the sender's fault
                return self.answer(400, b"")
            lines = [json.dumps(span, sort_keys=True) for span in spans(request)]
            with LOCK, open(output, "a", encoding="utf-8") as file:
                for line in lines:
                    file.write(line + "\n")
            self.answer(200, ExportTraceServiceResponse().SerializeToString())

        def answer(self, status, body):
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--output", required=True, help="the JSON lines file spans are appended to")
    arguments = parser.parse_args()
    open(arguments.output, "a", encoding="utf-8").close()
    server = ThreadingHTTPServer(("127.0.0.1", arguments.port), handler(arguments.output))
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
