"""An unmodified app for the zero-code test: a pydantic-ai agent on the global tracer provider."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

from demo_agent import run_scenarios
from opentelemetry import trace

run_scenarios(trace.get_tracer_provider(), ["stuck"])  # type: ignore[arg-type]
