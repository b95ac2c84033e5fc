"""Ways to plug trajgrade into what already runs: OpenTelemetry auto-configuration and collectors."""
