#!/usr/bin/env bash
# rotel (pip install rotel) in the two places trajgrade works with it. Ports as in the README.
set -euo pipefail
ROTEL_AGENT=$(python -c 'import rotel, pathlib; print(pathlib.Path(rotel.__file__).parent / "rotel-agent")')

case "${1:-}" in
  sidecar)
    # rotel in front of `trajgrade serve --otlp-http 127.0.0.1:14318 --forward http://127.0.0.1:24318`
    exec "$ROTEL_AGENT" start --otlp-grpc-endpoint 127.0.0.1:4317 --otlp-http-endpoint 127.0.0.1:4318 \
      --exporter otlp --otlp-exporter-protocol http --otlp-exporter-endpoint http://127.0.0.1:14318
    ;;
  processor)
    # trajgrade inside rotel, as its trace processor (no sidecar): results are added to each run's root span;
    # its log events (in-flight breaches, results) and metrics go over OTLP into rotel's own receiver, and on
    # to the backend with the spans
    : "${TRAJGRADE_CONFIG:?set TRAJGRADE_CONFIG to a graders file}"
    export OTEL_EXPORTER_OTLP_ENDPOINT="${OTEL_EXPORTER_OTLP_ENDPOINT:-http://127.0.0.1:4318}"
    PROCESSOR=$(python -c 'import trajgrade.doors.rotel as m; print(m.__file__)')
    exec "$ROTEL_AGENT" start --otlp-grpc-endpoint 127.0.0.1:4317 --otlp-http-endpoint 127.0.0.1:4318 \
      --otlp-with-trace-processor "$PROCESSOR" \
      --exporter otlp --otlp-exporter-protocol http --otlp-exporter-endpoint "${BACKEND:-http://127.0.0.1:24318}"
    ;;
  *)
    echo "usage: $0 sidecar|processor" >&2
    exit 2
    ;;
esac
