"""trajgrade as an OTLP sidecar beside a collector: receive, grade, forward (``trajgrade serve``)."""
